/* Moving many rows of a store in one pass: removing many entities' rows
 * (World._destroy), and a run of fresh rows taking its place in a group's prefix
 * (Group.enter_appended) (storage.py).
 *
 * A store's rows form runs: the prefixes of the groups that own it (innermost first),
 * then the rows no group holds. Removing k rows keeps each run in front of the next:
 * each run's surviving rows past its new end fill the holes in front of it
 * (storage.removal_plan). In numpy that plan and the moves take ~20 calls per store,
 * ~20 us at a few hundred rows whatever the store's size; here the same plan is walked
 * and applied in one loop. The rows that move, and where to, are exactly removal_plan's,
 * so a world's layout (and its state hash) is the same with or without this extension.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_buffers.h"

#define SLOT_MASK 0xFFFFFFFFull  /* an entity key is generation << 32 | slot */

static int
compare_rows(const void *a, const void *b)
{
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x > y) - (x < y);
}

/* How many of the ascending `rows[from:k]` lie below `bound` (a lower bound, from
 * `from` on). */
static Py_ssize_t
below(const Py_ssize_t *rows, Py_ssize_t from, Py_ssize_t k, Py_ssize_t bound)
{
    Py_ssize_t lo = from, hi = k;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (rows[mid] < bound) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo;
}

/* A store's arrays, to move its rows in place: `args[0]` its data (any dtype of plain
 * values, a tag's empty rows too: rows move as bytes, padding included), `args[1]` its
 * keys (uint64) and `args[2]` its slot -> row index (int32), all 1-d and writable, into
 * views[0..2]. 0, or -1 with an exception naming `op` (nothing held). */
static int
take_rows(PyObject *const *args, Py_buffer *views, const char *op)
{
    /* Rows move as bytes: a dtype holding Python objects would move references
     * without counting them. */
    PyObject *dtype = PyObject_GetAttrString(args[0], "dtype");
    PyObject *refs = dtype == NULL ? NULL : PyObject_GetAttrString(dtype, "hasobject");
    Py_XDECREF(dtype);
    int has_refs = refs == NULL ? -1 : PyObject_IsTrue(refs);
    Py_XDECREF(refs);
    if (has_refs != 0) {
        if (has_refs > 0 || PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: data must be a numpy array of plain values",
                         op);
        }
        return -1;
    }
    /* the rows as items of their own size (no format) */
    if (PyObject_GetBuffer(args[0], &views[0], PyBUF_WRITABLE | PyBUF_ND) < 0) {
        return -1;
    }
    if (views[0].ndim != 1 || views[0].itemsize < 0) {
        PyErr_Format(PyExc_ValueError, "%s: data must be a 1-d array", op);
    }
    else if (take_buffer(args[1], &views[1], 8, "LQ", "native uint64", 1, "entities") == 0) {
        if (take_buffer(args[2], &views[2], 4, "il", "native int32", 1, "sparse") == 0) {
            return 0;
        }
        PyBuffer_Release(&views[1]);
    }
    PyBuffer_Release(&views[0]);
    return -1;
}

/* Whether any two of `count` buffers share memory (a move must not rewrite a key or the
 * index); a ValueError naming `op` when they do. */
static int
overlapping(const Py_buffer *views, int count, const char *op)
{
    for (int i = 0; i < count; i++) {
        for (int j = i + 1; j < count; j++) {
            const char *a = views[i].buf, *b = views[j].buf;
            if (views[i].len && views[j].len && a < b + views[j].len && b < a + views[i].len) {
                PyErr_Format(PyExc_ValueError, "%s: the arrays overlap", op);
                return 1;
            }
        }
    }
    return 0;
}

PyDoc_STRVAR(remove_slots_doc,
"remove_slots(data, entities, sparse, slots, bounds) -> list[int] | None\n\n"
"Remove the rows of the entities in `slots` (distinct int64 slots) from a store:\n"
"`data` is its rows (a 1-d numpy array of plain values, a tag's empty rows too: rows\n"
"move as bytes, padding included), `entities` its keys (uint64), `sparse` its slot ->\n"
"row index (int32, -1: absent), none overlapping, `bounds` its runs' ends (ascending\n"
"ints, the last its row count). Slots the store does not hold are skipped.\n"
"Rows move as storage.removal_plan moves them; sparse follows. Returns the plan's\n"
"`cut` (how many removed rows lay below each bound), or None when the store held none\n"
"of the slots (nothing changed). ValueError, with nothing changed, for an index that\n"
"does not match the rows.");

static PyObject *
remove_slots(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "remove_slots takes 5 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *bounds_seq = PySequence_Fast(args[4], "remove_slots: bounds must be a list");
    if (bounds_seq == NULL) {
        return NULL;
    }
    Py_ssize_t runs = PySequence_Fast_GET_SIZE(bounds_seq);
    Py_ssize_t *bounds = runs ? PyMem_New(Py_ssize_t, runs) : NULL;
    if (runs == 0 || bounds == NULL) {
        Py_DECREF(bounds_seq);
        if (runs == 0) {
            PyErr_SetString(PyExc_ValueError, "remove_slots: bounds is empty");
        }
        else {
            PyErr_NoMemory();
        }
        return NULL;
    }
    for (Py_ssize_t p = 0; p < runs; p++) {
        bounds[p] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(bounds_seq, p));
        if (bounds[p] == -1 && PyErr_Occurred()) {
            Py_DECREF(bounds_seq);
            PyMem_Free(bounds);
            return NULL;
        }
        if (bounds[p] < (p ? bounds[p - 1] : 0)) {
            Py_DECREF(bounds_seq);
            PyMem_Free(bounds);
            PyErr_SetString(PyExc_ValueError, "remove_slots: bounds must ascend from 0");
            return NULL;
        }
    }
    Py_DECREF(bounds_seq);
    Py_ssize_t n = bounds[runs - 1];

    Py_buffer views[4];
    int taken = 0;
    if (take_rows(args, views, "remove_slots") == 0) {
        taken = 3;
        if (take_buffer(args[3], &views[3], 8, "lqn", "native int64", 0, "slots") == 0) {
            taken = 4;
        }
    }
    PyObject *result = NULL;
    Py_ssize_t *rows = NULL, *holes = NULL, *sources = NULL;
    if (taken < 4) {
        goto done;
    }
    char *data = (char *)views[0].buf;
    Py_ssize_t row_size = views[0].itemsize;
    uint64_t *keys = (uint64_t *)views[1].buf;
    int32_t *sparse = (int32_t *)views[2].buf;
    const int64_t *slots = (const int64_t *)views[3].buf;
    Py_ssize_t capacity = views[1].shape[0], index_size = views[2].shape[0];
    Py_ssize_t count = views[3].shape[0];
    if (n > capacity || views[0].shape[0] < n) {
        PyErr_SetString(PyExc_ValueError, "remove_slots: the row count exceeds the arrays");
        goto done;
    }
    if (overlapping(views, 4, "remove_slots")) {
        goto done;
    }

    /* The rows the store holds of those slots, checked before anything changes. */
    rows = PyMem_New(Py_ssize_t, count ? count : 1);
    if (rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i + 2 * PREFETCH_AHEAD < count) {  /* (the index entry, then the key's row) */
            int64_t later = slots[i + 2 * PREFETCH_AHEAD];
            if (later >= 0 && later < index_size) {
                PREFETCH(&sparse[later], 0);
            }
        }
        if (i + PREFETCH_AHEAD < count) {
            int64_t later = slots[i + PREFETCH_AHEAD];
            int32_t later_row = later >= 0 && later < index_size ? sparse[later] : -1;
            if (later_row >= 0 && later_row < n) {
                PREFETCH(&keys[later_row], 0);
                PREFETCH(data + later_row * row_size, 1);  /* (a hole, or its run's) */
            }
        }
        int64_t slot = slots[i];
        if (slot < 0 || slot >= index_size) {
            PyErr_Format(PyExc_ValueError, "remove_slots: slot %lld is outside the index",
                         (long long)slot);
            goto done;
        }
        int32_t row = sparse[slot];
        if (row < 0) {
            continue;
        }
        if (row >= n || (keys[row] & SLOT_MASK) != (uint64_t)slot) {
            PyErr_Format(PyExc_ValueError, "remove_slots: the index sends slot %lld to "
                         "row %ld, which does not hold it", (long long)slot, (long)row);
            goto done;
        }
        rows[k++] = row;
    }
    if (k == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    qsort(rows, (size_t)k, sizeof(Py_ssize_t), compare_rows);
    for (Py_ssize_t i = 1; i < k; i++) {
        if (rows[i] == rows[i - 1]) {
            PyErr_SetString(PyExc_ValueError, "remove_slots: a slot is given twice");
            goto done;
        }
    }

    /* removal_plan: per run, the holes below its new end (its predecessor's vacated
     * tail, then its removed rows there) and its survivors past the new end. */
    holes = PyMem_New(Py_ssize_t, k * runs);
    sources = PyMem_New(Py_ssize_t, k * runs);
    result = PyList_New(runs);
    if (holes == NULL || sources == NULL || result == NULL) {
        if (result == NULL) {
            goto done;
        }
        Py_CLEAR(result);
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t nholes = 0, nsources = 0, start = 0, new_start = 0, done_rows = 0;
    for (Py_ssize_t p = 0; p < runs; p++) {
        Py_ssize_t bound = bounds[p], cut = below(rows, done_rows, k, bound);
        Py_ssize_t end = bound - cut, low = end > start ? end : start;
        Py_ssize_t first_mover = below(rows, done_rows, k, low);
        Py_ssize_t gap_end = start < end ? start : end;
        for (Py_ssize_t h = new_start; h < gap_end; h++) {
            holes[nholes++] = h;
        }
        for (Py_ssize_t i = done_rows; i < first_mover; i++) {
            holes[nholes++] = rows[i];
        }
        Py_ssize_t skip = first_mover;  /* removed rows in [low, bound): no source */
        for (Py_ssize_t r = low; r < bound; r++) {
            if (skip < cut && rows[skip] == r) {
                skip++;
                continue;
            }
            sources[nsources++] = r;
        }
        PyObject *c = PyLong_FromSsize_t(cut);
        if (c == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, p, c);
        start = bound;
        new_start = end;
        done_rows = cut;
    }
    if (nholes != nsources) {  /* (cannot happen for ascending bounds: a plain check) */
        Py_CLEAR(result);
        PyErr_SetString(PyExc_SystemError, "remove_slots: the plan does not pair up");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nsources; i++) {
        if (i + PREFETCH_AHEAD < nsources) {
            PREFETCH(&keys[sources[i + PREFETCH_AHEAD]], 0);
            PREFETCH(data + sources[i + PREFETCH_AHEAD] * row_size, 0);
        }
        if ((Py_ssize_t)(keys[sources[i]] & SLOT_MASK) >= index_size) {
            Py_CLEAR(result);
            PyErr_SetString(PyExc_ValueError, "remove_slots: a moving key's slot is "
                            "outside the index");
            goto done;
        }
    }

    /* Apply it. Holes and sources ascend and each hole lies below its source, so moving
     * one row at a time in order reads every source before anything fills it. */
    for (Py_ssize_t i = 0; i < k; i++) {
        sparse[keys[rows[i]] & SLOT_MASK] = -1;
    }
    for (Py_ssize_t i = 0; i < nsources; i++) {
        if (i + PREFETCH_AHEAD < nsources) {  /* (the index entry of a key that moves) */
            PREFETCH(&sparse[keys[sources[i + PREFETCH_AHEAD]] & SLOT_MASK], 1);
            PREFETCH(data + holes[i + PREFETCH_AHEAD] * row_size, 1);
        }
        Py_ssize_t hole = holes[i], source = sources[i];
        memmove(data + hole * row_size, data + source * row_size, (size_t)row_size);
        uint64_t key = keys[source];
        keys[hole] = key;
        sparse[key & SLOT_MASK] = (int32_t)hole;
    }

done:
    while (taken--) {
        PyBuffer_Release(&views[taken]);
    }
    PyMem_Free(bounds);
    PyMem_Free(rows);
    PyMem_Free(holes);
    PyMem_Free(sources);
    return result;
}

PyDoc_STRVAR(move_block_doc,
"move_block(data, entities, sparse, start, to, count) -> None\n\n"
"ComponentStore.move_block: the run of rows [start, start + count) moves to [to, to +\n"
"count) (to < start); the rows it displaces take the places it left, in ascending\n"
"order (two runs trade places, or where they overlap the span rotates). Rows move as\n"
"bytes with their keys (`entities`, uint64) and the index (`sparse`, int32) follows.\n"
"ValueError, nothing changed, for rows outside the arrays or keys outside the index.");

static PyObject *
move_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "move_block takes 6 arguments, got %zd", nargs);
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[3]), to = PyLong_AsSsize_t(args[4]);
    Py_ssize_t count = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer views[3];
    int taken = take_rows(args, views, "move_block") == 0 ? 3 : 0;
    PyObject *result = NULL;
    char *held = NULL;
    uint64_t *held_keys = NULL;
    if (taken < 3) {
        goto done;
    }
    char *data = (char *)views[0].buf;
    Py_ssize_t row_size = views[0].itemsize;
    uint64_t *keys = (uint64_t *)views[1].buf;
    int32_t *sparse = (int32_t *)views[2].buf;
    Py_ssize_t rows = views[0].shape[0] < views[1].shape[0] ? views[0].shape[0]
                                                          : views[1].shape[0];
    Py_ssize_t index_size = views[2].shape[0], end = start + count;
    if (count < 0 || to < 0 || to >= start || start > rows - count) {
        PyErr_SetString(PyExc_ValueError, "move_block: rows outside the arrays");
        goto done;
    }
    if (overlapping(views, 3, "move_block")) {
        goto done;
    }
    /* the rows whose keys move: the two runs (apart), or the span they rotate */
    int apart = to + count <= start;
    Py_ssize_t spans[2][2] = {{to, apart ? to + count : end}, {start, apart ? end : start}};
    for (int s = 0; s < 2; s++) {
        for (Py_ssize_t r = spans[s][0]; r < spans[s][1]; r++) {
            if ((Py_ssize_t)(keys[r] & SLOT_MASK) >= index_size) {
                PyErr_SetString(PyExc_ValueError, "move_block: a moving key's slot is "
                                "outside the index");
                goto done;
            }
        }
    }
    /* the run that must wait: the one displaced (apart), or the moved one (overlap) */
    Py_ssize_t from = apart ? to : start;
    held = PyMem_Malloc((size_t)(count * row_size) + 1);
    held_keys = PyMem_New(uint64_t, count ? count : 1);
    if (held == NULL || held_keys == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(held, data + from * row_size, (size_t)(count * row_size));
    memcpy(held_keys, keys + from, (size_t)count * sizeof(uint64_t));
    if (apart) {  /* the runs trade places */
        memcpy(data + to * row_size, data + start * row_size, (size_t)(count * row_size));
        memcpy(keys + to, keys + start, (size_t)count * sizeof(uint64_t));
        memcpy(data + start * row_size, held, (size_t)(count * row_size));
        memcpy(keys + start, held_keys, (size_t)count * sizeof(uint64_t));
    }
    else {  /* overlapping: the rows it displaces shift up, then the run goes in */
        memmove(data + (to + count) * row_size, data + to * row_size,
                (size_t)((start - to) * row_size));
        memmove(keys + to + count, keys + to, (size_t)(start - to) * sizeof(uint64_t));
        memcpy(data + to * row_size, held, (size_t)(count * row_size));
        memcpy(keys + to, held_keys, (size_t)count * sizeof(uint64_t));
    }
    for (int s = 0; s < 2; s++) {
        for (Py_ssize_t r = spans[s][0]; r < spans[s][1]; r++) {
            if (r + PREFETCH_AHEAD < spans[s][1]) {
                PREFETCH(&sparse[keys[r + PREFETCH_AHEAD] & SLOT_MASK], 1);
            }
            sparse[keys[r] & SLOT_MASK] = (int32_t)r;
        }
    }
    result = Py_NewRef(Py_None);
done:
    while (taken--) {
        PyBuffer_Release(&views[taken]);
    }
    PyMem_Free(held);
    PyMem_Free(held_keys);
    return result;
}

static PyMethodDef removal_methods[] = {
    {"remove_slots", (PyCFunction)(void (*)(void))remove_slots, METH_FASTCALL,
     remove_slots_doc},
    {"move_block", (PyCFunction)(void (*)(void))move_block, METH_FASTCALL, move_block_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef removal_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ecs_engine._removal",
    .m_doc = "Moving many rows of a store in one pass (see storage.py).",
    .m_size = 0,
    .m_methods = removal_methods,
};

PyMODINIT_FUNC
PyInit__removal(void)
{
    return PyModuleDef_Init(&removal_module);
}
