/* Checking a save's entity keys against its slot table, one pass each (snapshot.py).
 *
 * fill_live_keys builds the table of every slot's live key; index_live_keys checks a
 * store's keys against it and indexes their rows. The numpy path (snapshot.live_keys,
 * snapshot._index_live_keys) takes five passes over every block of keys: mask, gather,
 * compare, all, scatter. At a million keys that is ~2 ms of a ~6 ms load, and a load
 * waits for it. Here each is one loop, with the GIL released, so the checks run beside
 * the file read (lookahead.py) without taking the GIL from it. Optional: an install
 * without a C compiler takes the numpy path, which gives the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SLOT_MASK 0xFFFFFFFFull  /* an entity key is generation << 32 | slot */
#define GIL_FREE_FROM 4096       /* fewer keys: releasing the GIL costs more than it frees */

/* Whether a buffer's struct format is one native-order item of a code in `codes`. */
static int
native_item(const char *format, const char *codes)
{
    if (format == NULL) {
        return 0;
    }
    if (*format == '@' || *format == '=') {
        format++;
    }
#if PY_LITTLE_ENDIAN
    else if (*format == '<') {
        format++;
    }
#else
    else if (*format == '>' || *format == '!') {
        format++;
    }
#endif
    return format[0] != '\0' && format[1] == '\0' && strchr(codes, format[0]) != NULL;
}

/* A 1-d C-contiguous buffer of native `itemsize`-byte integers of a struct code in
 * `codes` (e.g. "LQ": unsigned 64-bit); 0, or -1 with an exception set. */
static int
take_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *codes,
            int writable, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize || !native_item(view->format, codes)) {
        PyErr_Format(PyExc_ValueError, "%s must be a 1-d array of native %zd-byte %s "
                     "integers", what, itemsize, strchr(codes, 'i') || strchr(codes, 'l')
                     ? "signed" : "unsigned");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(index_live_keys_doc,
"index_live_keys(keys, live, sparse) -> int\n\n"
"Check that every key (uint64) is the live key of its slot (live[slot] == key, for\n"
"slot = key & 0xFFFFFFFF < len(live)) and write its row into sparse[slot] (int32,\n"
"at least len(live) long, -1 where no key is). 0: a key is not alive (sparse partly\n"
"written); 1: every key alive, each slot once; 2: every key alive, a slot twice.");

static PyObject *
index_live_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "index_live_keys takes 3 arguments, got %zd", nargs);
        return NULL;
    }
    Py_buffer keys_view, live_view, sparse_view;
    if (take_buffer(args[0], &keys_view, 8, "LQ", 0, "keys") < 0) {
        return NULL;
    }
    if (take_buffer(args[1], &live_view, 8, "LQ", 0, "live") < 0) {
        PyBuffer_Release(&keys_view);
        return NULL;
    }
    if (take_buffer(args[2], &sparse_view, 4, "il", 1, "sparse") < 0) {
        PyBuffer_Release(&keys_view);
        PyBuffer_Release(&live_view);
        return NULL;
    }
    const uint64_t *keys = (const uint64_t *)keys_view.buf;
    const uint64_t *live = (const uint64_t *)live_view.buf;
    int32_t *sparse = (int32_t *)sparse_view.buf;
    Py_ssize_t n = keys_view.shape[0];
    uint64_t high_water = (uint64_t)live_view.shape[0];
    long result = -1;
    if ((uint64_t)sparse_view.shape[0] < high_water) {
        PyErr_SetString(PyExc_ValueError, "index_live_keys: sparse is shorter than live");
    }
    else if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "index_live_keys: more keys than int32 rows");
    }
    else {
        int alive = 1, repeated = 0;
        PyThreadState *released = n >= GIL_FREE_FROM ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t row = 0; row < n; row++) {
            uint64_t key = keys[row];  /* read once: another thread may be writing it */
            uint64_t slot = key & SLOT_MASK;
            if (slot >= high_water || live[slot] != key) {
                alive = 0;
                break;
            }
            repeated |= sparse[slot] >= 0;
            sparse[slot] = (int32_t)row;
        }
        if (released != NULL) {
            PyEval_RestoreThread(released);
        }
        result = alive ? (repeated ? 2 : 1) : 0;
    }
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&live_view);
    PyBuffer_Release(&sparse_view);
    return result < 0 ? NULL : PyLong_FromLong(result);
}

PyDoc_STRVAR(fill_live_keys_doc,
"fill_live_keys(generations, free, live) -> bool\n\n"
"live[slot] = generations[slot] << 32 | slot for every slot (generations: uint32,\n"
"live: uint64 of the same length), then all ones at every slot of free (int64).\n"
"False (live partly written) when free names a slot outside the table.");

static PyObject *
fill_live_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "fill_live_keys takes 3 arguments, got %zd", nargs);
        return NULL;
    }
    Py_buffer gens_view, free_view, live_view;
    if (take_buffer(args[0], &gens_view, 4, "IL", 0, "generations") < 0) {
        return NULL;
    }
    if (take_buffer(args[1], &free_view, 8, "lq", 0, "free") < 0) {
        PyBuffer_Release(&gens_view);
        return NULL;
    }
    if (take_buffer(args[2], &live_view, 8, "LQ", 1, "live") < 0) {
        PyBuffer_Release(&gens_view);
        PyBuffer_Release(&free_view);
        return NULL;
    }
    const uint32_t *gens = (const uint32_t *)gens_view.buf;
    const int64_t *free_slots = (const int64_t *)free_view.buf;
    uint64_t *live = (uint64_t *)live_view.buf;
    Py_ssize_t high_water = gens_view.shape[0], nfree = free_view.shape[0];
    int in_table = 1;
    if (live_view.shape[0] != high_water) {
        PyErr_SetString(PyExc_ValueError, "fill_live_keys: live and generations differ in "
                        "length");
        in_table = -1;
    }
    else {
        PyThreadState *released = high_water >= GIL_FREE_FROM ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t slot = 0; slot < high_water; slot++) {
            live[slot] = (uint64_t)gens[slot] << 32 | (uint64_t)slot;
        }
        for (Py_ssize_t i = 0; i < nfree; i++) {
            int64_t slot = free_slots[i];
            if (slot < 0 || slot >= high_water) {
                in_table = 0;
                break;
            }
            live[slot] = UINT64_MAX;
        }
        if (released != NULL) {
            PyEval_RestoreThread(released);
        }
    }
    PyBuffer_Release(&gens_view);
    PyBuffer_Release(&free_view);
    PyBuffer_Release(&live_view);
    if (in_table < 0) {
        return NULL;
    }
    return PyBool_FromLong(in_table);
}

static PyMethodDef keyindex_methods[] = {
    {"fill_live_keys", (PyCFunction)(void (*)(void))fill_live_keys, METH_FASTCALL,
     fill_live_keys_doc},
    {"index_live_keys", (PyCFunction)(void (*)(void))index_live_keys, METH_FASTCALL,
     index_live_keys_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef keyindex_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ecs_engine._keyindex",
    .m_doc = "One-pass entity key checks for loads (optional; see snapshot.KeyIndex).",
    .m_size = 0,
    .m_methods = keyindex_methods,
};

PyMODINIT_FUNC
PyInit__keyindex(void)
{
    return PyModuleDef_Init(&keyindex_module);
}
