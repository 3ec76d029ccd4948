/* Checking a store's entity keys against a save's slot table in one pass (snapshot.py).
 *
 * index_slot_keys reads the table's generations and alive flags as they are and indexes
 * the keys' rows. The numpy path (snapshot.live_keys, snapshot._index_live_keys) first
 * builds a table of every slot's live key (an 8 MB array per million slots), then takes
 * five passes over every block of keys: mask, gather, compare, all, scatter. At a million
 * keys that is ~2 ms of a ~6 ms load, and a load waits for it. Here it is one loop, with
 * the GIL released, so the checks run beside the file read (lookahead.py) without taking
 * the GIL from it.
 *
 * live_distinct checks a batch of keys a world call is given (World._check_alive_batch:
 * despawn_batch, add_batch, remove_batch, set_parent of many children, blueprint
 * extraction) against the world's slot table: alive, and each once. The numpy path takes ~10 calls (slots, bounds, two gathers, compares, a
 * sort for repeats), ~20 us at a few hundred keys warm and several times that when the
 * rest of a frame has left numpy's code cold; here it is one loop.
 *
 * Optional: an install without a C compiler takes the numpy paths, which give the same
 * answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_buffers.h"

#define SLOT_MASK 0xFFFFFFFFull  /* an entity key is generation << 32 | slot */
#define GIL_FREE_FROM 4096       /* fewer keys: releasing the GIL costs more than it frees */

PyDoc_STRVAR(index_slot_keys_doc,
"index_slot_keys(keys, generations, alive, sparse) -> int\n\n"
"Fill sparse (int32, at least as long as the slot table) with -1, then check that\n"
"every key (uint64) is the live key of its slot (slot = key & 0xFFFFFFFF within the\n"
"table, alive[slot], generations[slot] == key >> 32) and write its row into\n"
"sparse[slot]. 0: a key is not alive (sparse partly written); 1: every key alive,\n"
"each slot once; 2: every key alive, a slot twice.");

static PyObject *
index_slot_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "index_slot_keys takes 4 arguments, got %zd", nargs);
        return NULL;
    }
    Py_buffer views[4];
    static const struct { Py_ssize_t itemsize; const char *codes, *kind; int writable;
                          const char *what; } wanted[4] = {
        {8, "LQ", "native uint64", 0, "keys"}, {4, "IL", "native uint32", 0, "generations"},
        {1, "?", "bools", 0, "alive"}, {4, "il", "native int32", 1, "sparse"}};
    for (int i = 0; i < 4; i++) {
        if (take_buffer(args[i], &views[i], wanted[i].itemsize, wanted[i].codes,
                        wanted[i].kind, wanted[i].writable, wanted[i].what) < 0) {
            while (i--) {
                PyBuffer_Release(&views[i]);
            }
            return NULL;
        }
    }
    const uint64_t *keys = (const uint64_t *)views[0].buf;
    const uint32_t *generations = (const uint32_t *)views[1].buf;
    const unsigned char *alive = (const unsigned char *)views[2].buf;
    int32_t *sparse = (int32_t *)views[3].buf;
    Py_ssize_t n = views[0].shape[0], capacity = views[3].shape[0];
    uint64_t high_water = (uint64_t)views[1].shape[0];
    long result = -1;
    if ((uint64_t)views[2].shape[0] != high_water) {
        PyErr_SetString(PyExc_ValueError, "index_slot_keys: alive and generations differ in "
                        "length");
    }
    else if ((uint64_t)capacity < high_water) {
        PyErr_SetString(PyExc_ValueError, "index_slot_keys: sparse is shorter than the slot "
                        "table");
    }
    else if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "index_slot_keys: more keys than int32 rows");
    }
    else {
        int in_table = 1, repeated = 0;
        PyThreadState *released = n + capacity >= GIL_FREE_FROM ? PyEval_SaveThread() : NULL;
        memset(sparse, 0xFF, (size_t)capacity * sizeof(int32_t));  /* every entry -1 */
        for (Py_ssize_t row = 0; row < n; row++) {
            uint64_t key = keys[row];  /* read once: another thread may be writing it */
            uint64_t slot = key & SLOT_MASK;
            if (slot >= high_water || !alive[slot] || generations[slot] != key >> 32) {
                in_table = 0;
                break;
            }
            repeated |= sparse[slot] >= 0;
            sparse[slot] = (int32_t)row;
        }
        if (released != NULL) {
            PyEval_RestoreThread(released);
        }
        result = in_table ? (repeated ? 2 : 1) : 0;
    }
    for (int i = 0; i < 4; i++) {
        PyBuffer_Release(&views[i]);
    }
    return result < 0 ? NULL : PyLong_FromLong(result);
}

static int
compare_keys(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

PyDoc_STRVAR(live_distinct_doc,
"live_distinct(keys, generations, alive, high_water) -> int\n\n"
"Whether every key (uint64) is alive in the slot table whose first high_water slots\n"
"generations (uint32) and alive (bools) hold, and no key is given twice: 1 yes; 0 a key\n"
"is not alive; 2 every key alive, one given twice (the caller names which).");

static PyObject *
live_distinct(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "live_distinct takes 4 arguments, got %zd", nargs);
        return NULL;
    }
    Py_ssize_t high_water = PyLong_AsSsize_t(args[3]);
    if (high_water == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer views[3];
    static const struct { Py_ssize_t itemsize; const char *codes, *kind; const char *what; }
        wanted[3] = {{8, "LQ", "native uint64", "keys"},
                     {4, "IL", "native uint32", "generations"}, {1, "?", "bools", "alive"}};
    int taken = 0;
    for (; taken < 3; taken++) {
        if (take_buffer(args[taken], &views[taken], wanted[taken].itemsize,
                        wanted[taken].codes, wanted[taken].kind, 0, wanted[taken].what) < 0) {
            break;
        }
    }
    long result = -1;
    uint64_t *seen = NULL;
    unsigned char *marks = NULL;
    if (taken < 3) {
        goto done;
    }
    if (high_water < 0 || high_water > views[1].shape[0] || high_water > views[2].shape[0]) {
        PyErr_SetString(PyExc_ValueError, "live_distinct: high_water exceeds the table");
        goto done;
    }
    const uint64_t *keys = (const uint64_t *)views[0].buf;
    const uint32_t *generations = (const uint32_t *)views[1].buf;
    const unsigned char *alive = (const unsigned char *)views[2].buf;
    Py_ssize_t n = views[0].shape[0];
    result = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t key = keys[i], slot = key & SLOT_MASK;
        if (slot >= (uint64_t)high_water || !alive[slot] || generations[slot] != key >> 32) {
            result = 0;
            goto done;
        }
    }
    if (n < 2) {
        goto done;
    }
    /* Repeats: the live keys' slots are distinct exactly when the keys are. A bitmap of
     * the table for big batches, a sorted copy for small ones in big tables. */
    if (n >= high_water / 16) {
        marks = PyMem_Calloc((size_t)high_water / 8 + 1, 1);
        if (marks == NULL) {
            PyErr_NoMemory();
            result = -1;
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t slot = keys[i] & SLOT_MASK;
            unsigned char bit = (unsigned char)(1u << (slot & 7));
            if (marks[slot >> 3] & bit) {
                result = 2;
                break;
            }
            marks[slot >> 3] |= bit;
        }
    }
    else {
        seen = PyMem_New(uint64_t, n);
        if (seen == NULL) {
            PyErr_NoMemory();
            result = -1;
            goto done;
        }
        memcpy(seen, keys, (size_t)n * sizeof(uint64_t));
        qsort(seen, (size_t)n, sizeof(uint64_t), compare_keys);
        for (Py_ssize_t i = 1; i < n; i++) {
            if (seen[i] == seen[i - 1]) {
                result = 2;
                break;
            }
        }
    }
done:
    while (taken--) {
        PyBuffer_Release(&views[taken]);
    }
    PyMem_Free(seen);
    PyMem_Free(marks);
    return result < 0 ? NULL : PyLong_FromLong(result);
}

static PyMethodDef keyindex_methods[] = {
    {"index_slot_keys", (PyCFunction)(void (*)(void))index_slot_keys, METH_FASTCALL,
     index_slot_keys_doc},
    {"live_distinct", (PyCFunction)(void (*)(void))live_distinct, METH_FASTCALL,
     live_distinct_doc},
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
