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
 * allocate_slots and release_slots are SlotMap.allocate and release of a batch (a tick's
 * respawns and despawns): five to seven numpy calls each, a few microseconds warm and
 * ~25 us each when the rest of a frame has left numpy's code and the table cold.
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
        if (i + PREFETCH_AHEAD < n) {  /* (the slots lie anywhere in the table) */
            uint64_t later = keys[i + PREFETCH_AHEAD] & SLOT_MASK;
            if (later < (uint64_t)high_water) {
                PREFETCH(&generations[later], 0);
                PREFETCH(&alive[later], 0);
            }
        }
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

/* The slot table's three arrays for writing (generations uint32, alive bools, free int64)
 * and a count of slots with `n_free` (its free stack's height) and `high_water` checked
 * against them: 0, or -1 with an exception (nothing held). */
static int
take_table(PyObject *const *args, Py_buffer *views, Py_ssize_t n_free,
           Py_ssize_t high_water, const char *op)
{
    static const struct { Py_ssize_t itemsize; const char *codes, *kind; const char *what; }
        wanted[3] = {{4, "IL", "native uint32", "generations"}, {1, "?", "bools", "alive"},
                     {8, "lqn", "native int64", "free"}};
    int taken = 0;
    for (; taken < 3; taken++) {
        if (take_buffer(args[taken], &views[taken], wanted[taken].itemsize,
                        wanted[taken].codes, wanted[taken].kind, 1, wanted[taken].what) < 0) {
            break;
        }
    }
    if (taken == 3) {
        Py_ssize_t size = views[0].shape[0];
        if (views[1].shape[0] != size || views[2].shape[0] != size || n_free < 0
                || high_water < 0 || high_water > size || n_free > high_water) {
            PyErr_Format(PyExc_ValueError, "%s: the slot table's arrays, free count and "
                         "high water do not agree", op);
        }
        else {
            return 0;
        }
    }
    while (taken--) {
        PyBuffer_Release(&views[taken]);
    }
    return -1;
}

PyDoc_STRVAR(allocate_slots_doc,
"allocate_slots(keys, generations, alive, free, n_free, high_water) -> None\n\n"
"SlotMap.allocate of len(keys) keys, written to `keys` (uint64): the top of the free\n"
"stack (free[:n_free], int64) first, popped in order, then never-used slots from\n"
"high_water on (generation 1); each is marked alive. The caller grew the table to hold\n"
"them and updates its counts. ValueError, nothing changed, when it does not hold them.");

static PyObject *
allocate_slots(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "allocate_slots takes 6 arguments, got %zd", nargs);
        return NULL;
    }
    Py_ssize_t n_free = PyLong_AsSsize_t(args[4]), high_water = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer out, table[3];
    if (take_buffer(args[0], &out, 8, "LQ", "native uint64", 1, "keys") < 0) {
        return NULL;
    }
    if (take_table(args + 1, table, n_free, high_water, "allocate_slots") < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    uint64_t *keys = (uint64_t *)out.buf;
    uint32_t *generations = (uint32_t *)table[0].buf;
    unsigned char *alive = (unsigned char *)table[1].buf;
    const int64_t *free_slots = (const int64_t *)table[2].buf;
    Py_ssize_t count = out.shape[0], size = table[0].shape[0];
    Py_ssize_t reused = count < n_free ? count : n_free, fresh = count - reused;
    PyObject *result = NULL;
    if (fresh > size - high_water) {
        PyErr_SetString(PyExc_ValueError, "allocate_slots: the table has no room for them");
        goto done;
    }
    for (Py_ssize_t i = 0; i < reused; i++) {
        int64_t slot = free_slots[n_free - 1 - i];
        if (slot < 0 || slot >= high_water) {
            PyErr_SetString(PyExc_ValueError, "allocate_slots: a free slot is outside the "
                            "used table");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < reused; i++) {
        if (i + PREFETCH_AHEAD < reused) {
            int64_t later = free_slots[n_free - 1 - i - PREFETCH_AHEAD];
            PREFETCH(&generations[later], 0);
            PREFETCH(&alive[later], 1);
        }
        int64_t slot = free_slots[n_free - 1 - i];
        alive[slot] = 1;
        keys[i] = (uint64_t)generations[slot] << 32 | (uint64_t)slot;
    }
    for (Py_ssize_t j = 0; j < fresh; j++) {  /* never used: generation 1 */
        Py_ssize_t slot = high_water + j;
        alive[slot] = 1;
        keys[reused + j] = (uint64_t)1 << 32 | (uint64_t)slot;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out);
    for (int i = 0; i < 3; i++) {
        PyBuffer_Release(&table[i]);
    }
    return result;
}

PyDoc_STRVAR(release_slots_doc,
"release_slots(slots, generations, alive, free, n_free, high_water) -> None\n\n"
"SlotMap.release of the live slots `slots` (int64, distinct, checked by the caller):\n"
"each generation moves on (past 2**32 - 1 to 1, never 0), each slot is marked free and\n"
"pushed on the free stack at free[n_free:]. The caller updates its counts. ValueError,\n"
"nothing changed, for a slot outside the used table or a stack without room.");

static PyObject *
release_slots(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "release_slots takes 6 arguments, got %zd", nargs);
        return NULL;
    }
    Py_ssize_t n_free = PyLong_AsSsize_t(args[4]), high_water = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer in, table[3];
    if (take_buffer(args[0], &in, 8, "lqn", "native int64", 0, "slots") < 0) {
        return NULL;
    }
    if (take_table(args + 1, table, n_free, high_water, "release_slots") < 0) {
        PyBuffer_Release(&in);
        return NULL;
    }
    const int64_t *slots = (const int64_t *)in.buf;
    uint32_t *generations = (uint32_t *)table[0].buf;
    unsigned char *alive = (unsigned char *)table[1].buf;
    int64_t *free_slots = (int64_t *)table[2].buf;
    Py_ssize_t count = in.shape[0], size = table[0].shape[0];
    PyObject *result = NULL;
    if (count > size - n_free) {
        PyErr_SetString(PyExc_ValueError, "release_slots: the free stack has no room");
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (slots[i] < 0 || slots[i] >= high_water) {
            PyErr_SetString(PyExc_ValueError, "release_slots: a slot is outside the used "
                            "table");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i + PREFETCH_AHEAD < count) {
            PREFETCH(&generations[slots[i + PREFETCH_AHEAD]], 1);
            PREFETCH(&alive[slots[i + PREFETCH_AHEAD]], 1);
        }
        int64_t slot = slots[i];
        uint32_t generation = generations[slot] + 1;  /* (wraps to 0: that marks NULL) */
        generations[slot] = generation ? generation : 1;
        alive[slot] = 0;
        free_slots[n_free + i] = slot;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&in);
    for (int i = 0; i < 3; i++) {
        PyBuffer_Release(&table[i]);
    }
    return result;
}

static PyMethodDef keyindex_methods[] = {
    {"index_slot_keys", (PyCFunction)(void (*)(void))index_slot_keys, METH_FASTCALL,
     index_slot_keys_doc},
    {"live_distinct", (PyCFunction)(void (*)(void))live_distinct, METH_FASTCALL,
     live_distinct_doc},
    {"allocate_slots", (PyCFunction)(void (*)(void))allocate_slots, METH_FASTCALL,
     allocate_slots_doc},
    {"release_slots", (PyCFunction)(void (*)(void))release_slots, METH_FASTCALL,
     release_slots_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef keyindex_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ecs_engine._keyindex",
    .m_doc = "One-pass entity key checks and slot table batches (optional; see "
             "snapshot.KeyIndex, World._check_alive_batch and SlotMap).",
    .m_size = 0,
    .m_methods = keyindex_methods,
};

PyMODINIT_FUNC
PyInit__keyindex(void)
{
    return PyModuleDef_Init(&keyindex_module);
}
