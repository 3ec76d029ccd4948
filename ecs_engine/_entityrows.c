/* One entity's rows, added to or removed from every store it has in one call
 * (World.spawn, spawn_batch of a few, despawn of one: world.py).
 *
 * Spawning or despawning one entity moves a few rows in each of its stores: its own
 * row, and for each owning group it joins or leaves (each level of nested groups) the
 * row past the group's prefix or the prefix's last row. In Python each move is a method
 * call, an index write through numpy and a version bump: ~0.3 us a row, 8-13 us for an
 * entity of four stores in two nested groups, where esper takes ~1 us. Here the same rows
 * move in the same order as storage.py's insert_chain / remove_chain / remove_one and
 * Group.remove_one, so a world's layout (and its state hash) does not depend on whether
 * this extension was built. Anything unexpected (an array of another kind, an index that
 * does not match the rows) is found before anything changes: the call then reports
 * False and the Python path does the whole job, raising what it finds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define SLOT_MASK 0xFFFFFFFFull  /* an entity key is generation << 32 | slot */
#define MAX_STORES 64   /* components of one entity, stores of a group (more: Python) */
#define MAX_LEVELS 16   /* levels of nested groups one entity joins (more: Python) */

typedef struct {
    PyObject *n, *data, *entities, *sparse, *chunks, *owner, *group_size, *versions;
    PyObject *clock, *stamp, *layout_version, *data_version, *reserve, *write_row;
    PyObject *root, *inner, *levels, *own, *stores, *size, *depth;
} Names;

typedef struct {
    Names names;
} State;

/* A store's arrays, held for the call. */
typedef struct {
    PyObject *store;
    PyObject *group;  /* (remove_entity: the group whose prefix holds the entity, or NULL) */
    PyArrayObject *data, *entities, *sparse, *chunks;
    char *rows;
    Py_ssize_t row_size, capacity, n, slots, nchunks;
    uint64_t *keys;
    int32_t *index;
    int64_t *marks;
} Rows;

static State *
state_of(PyObject *module)
{
    return (State *)PyModule_GetState(module);
}

/* An attribute that is an exact int within a Py_ssize_t: 1; 0 when it is not (no
 * exception); -1 on an error. */
static int
ssize_attr(PyObject *obj, PyObject *name, Py_ssize_t *out)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) {
        return -1;
    }
    int ok = 0;
    if (PyLong_CheckExact(value)) {
        *out = PyLong_AsSsize_t(value);
        if (*out == -1 && PyErr_Occurred()) {
            PyErr_Clear();
        }
        else {
            ok = 1;
        }
    }
    Py_DECREF(value);
    return ok;
}

static int
set_ssize_attr(PyObject *obj, PyObject *name, Py_ssize_t value)
{
    PyObject *boxed = PyLong_FromSsize_t(value);
    if (boxed == NULL) {
        return -1;
    }
    int done = PyObject_SetAttr(obj, name, boxed);
    Py_DECREF(boxed);
    return done;
}

/* A 1-d C-contiguous, aligned, writable array of native items of `type_num` (any
 * plain-bytes type for NPY_NOTYPE) held in `*out`: 1; 0 (nothing held) when the
 * attribute is not one; -1 on an error. */
static int
array_attr(PyObject *obj, PyObject *name, int type_num, PyArrayObject **out)
{
    *out = NULL;
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) {
        return -1;
    }
    if (!PyArray_Check(value)) {
        Py_DECREF(value);
        return 0;
    }
    PyArrayObject *arr = (PyArrayObject *)value;
    int flags = PyArray_FLAGS(arr);
    int wanted = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE;
    PyArray_Descr *descr = PyArray_DESCR(arr);
    if (PyArray_NDIM(arr) != 1 || (flags & wanted) != wanted
            || PyDataType_REFCHK(descr)
            || (type_num != NPY_NOTYPE
                && (PyArray_TYPE(arr) != type_num || !PyArray_ISNOTSWAPPED(arr)))) {
        Py_DECREF(value);
        return 0;
    }
    *out = arr;
    return 1;
}

static void
release_rows(Rows *r)
{
    Py_CLEAR(r->data);
    Py_CLEAR(r->entities);
    Py_CLEAR(r->sparse);
    Py_CLEAR(r->chunks);
    Py_CLEAR(r->group);
}

/* Take a store's arrays and row count: 1; 0 (nothing held) when one is not what the
 * store keeps (the Python path then does the job); -1 on an error. */
static int
open_rows(State *st, PyObject *store, Rows *r)
{
    Names *nm = &st->names;
    memset(r, 0, sizeof(*r));
    r->store = store;
    int got = ssize_attr(store, nm->n, &r->n);
    if (got <= 0) {
        return got;
    }
    if ((got = array_attr(store, nm->data, NPY_NOTYPE, &r->data)) <= 0
            || (got = array_attr(store, nm->entities, NPY_UINT64, &r->entities)) <= 0
            || (got = array_attr(store, nm->sparse, NPY_INT32, &r->sparse)) <= 0
            || (got = array_attr(store, nm->chunks, NPY_INT64, &r->chunks)) <= 0) {
        release_rows(r);
        return got;
    }
    r->rows = PyArray_BYTES(r->data);
    r->row_size = PyArray_ITEMSIZE(r->data);
    r->capacity = PyArray_DIM(r->data, 0);
    r->keys = (uint64_t *)PyArray_DATA(r->entities);
    r->index = (int32_t *)PyArray_DATA(r->sparse);
    r->slots = PyArray_DIM(r->sparse, 0);
    r->marks = (int64_t *)PyArray_DATA(r->chunks);
    r->nchunks = PyArray_DIM(r->chunks, 0);
    if (r->n < 0 || r->n > r->capacity || PyArray_DIM(r->entities, 0) < r->capacity) {
        release_rows(r);
        return 0;
    }
    return 1;
}

/* Row `src`'s values and key to row `dst`; the index follows the key
 * (ComponentStore._move_one). The caller checked both rows and every live key's slot. */
static void
move_row(Rows *r, Py_ssize_t dst, Py_ssize_t src)
{
    if (r->row_size) {
        memmove(r->rows + dst * r->row_size, r->rows + src * r->row_size,
                (size_t)r->row_size);
    }
    uint64_t key = r->keys[src];
    r->keys[dst] = key;
    r->index[key & SLOT_MASK] = (int32_t)dst;
}

/* Whether row `row` (live) holds a key whose slot lies inside the index: one that
 * may move. */
static int
movable(Rows *r, Py_ssize_t row)
{
    return row >= 0 && row < r->n && (Py_ssize_t)(r->keys[row] & SLOT_MASK) < r->slots;
}

/* clock.stamp += 1. 0, or -1. */
static int
bump_stamp(State *st, PyObject *clock)
{
    PyObject *one = PyLong_FromLong(1);
    PyObject *stamp = one == NULL ? NULL : PyObject_GetAttr(clock, st->names.stamp);
    PyObject *next = stamp == NULL ? NULL : PyNumber_Add(stamp, one);
    int done = next == NULL ? -1 : PyObject_SetAttr(clock, st->names.stamp, next);
    Py_XDECREF(next);
    Py_XDECREF(stamp);
    Py_XDECREF(one);
    return done;
}

/* ComponentStore._touch_layout_rows: a new version for the layout and the data, the
 * layout clock moved, the chunks of `rows` (count of them) marked. 0, or -1. */
static int
touch_layout(State *st, Rows *r, const Py_ssize_t *rows, int count, Py_ssize_t chunk_rows)
{
    Names *nm = &st->names;
    PyObject *versions = PyObject_GetAttr(r->store, nm->versions);
    if (versions == NULL) {
        return -1;
    }
    PyObject *version = PyIter_Next(versions);
    Py_DECREF(versions);
    if (version == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "the world's version counter ran out");
        }
        return -1;
    }
    long long v = PyLong_AsLongLong(version);
    if ((v == -1 && PyErr_Occurred())
            || PyObject_SetAttr(r->store, nm->layout_version, version) < 0
            || PyObject_SetAttr(r->store, nm->data_version, version) < 0) {
        Py_DECREF(version);
        return -1;
    }
    Py_DECREF(version);
    for (int i = 0; i < count; i++) {
        r->marks[rows[i] / chunk_rows] = (int64_t)v;
    }
    PyObject *clock = PyObject_GetAttr(r->store, nm->clock);
    if (clock == NULL) {
        return -1;
    }
    int done = bump_stamp(st, clock);
    Py_DECREF(clock);
    return done;
}

/* Group._set_size. 0, or -1. */
static int
set_group_size(State *st, PyObject *group, Py_ssize_t size)
{
    Names *nm = &st->names;
    PyObject *boxed = PyLong_FromSsize_t(size);
    if (boxed == NULL) {
        return -1;
    }
    int done = PyObject_SetAttr(group, nm->size, boxed);
    PyObject *own = done < 0 ? NULL : PyObject_GetAttr(group, nm->own);
    PyObject *own_seq = own == NULL ? NULL : PySequence_Fast(own, "Group.own");
    Py_XDECREF(own);
    if (own_seq == NULL) {
        Py_DECREF(boxed);
        return -1;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(own_seq);
    for (Py_ssize_t i = 0; i < k && done == 0; i++) {
        done = PyObject_SetAttr(PySequence_Fast_GET_ITEM(own_seq, i), nm->group_size, boxed);
    }
    Py_DECREF(boxed);
    if (done == 0 && k > 0) {
        PyObject *clock = PyObject_GetAttr(PySequence_Fast_GET_ITEM(own_seq, 0), nm->clock);
        done = clock == NULL ? -1 : bump_stamp(st, clock);
        Py_XDECREF(clock);
    }
    Py_DECREF(own_seq);
    return done;
}

/* ------------------------------------------------------------------ insert_entity */

static int
contains_ptr(PyObject *const *items, Py_ssize_t k, PyObject *item)
{
    for (Py_ssize_t i = 0; i < k; i++) {
        if (items[i] == item) {
            return 1;
        }
    }
    return 0;
}

/* The levels of `root`'s chain (outermost first) that an entity with exactly `stores`
 * joins, appended to `joined` (group.join_levels): each level whose own stores it all
 * has, up to the first it lacks. New references. 0; 1 when they would be more than
 * MAX_LEVELS in all (no exception: the caller leaves the spawn to Python); -1 on an
 * error. */
static int
join_levels(State *st, PyObject *const *stores, Py_ssize_t nstores, PyObject *root,
            PyObject **joined, Py_ssize_t *njoined)
{
    Names *nm = &st->names;
    PyObject *level = Py_NewRef(root);
    while (level != Py_None) {
        PyObject *own = PyObject_GetAttr(level, nm->own);
        PyObject *seq = own == NULL ? NULL : PySequence_Fast(own, "Group.own");
        Py_XDECREF(own);
        if (seq == NULL) {
            Py_DECREF(level);
            return -1;
        }
        int all = 1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && all; i++) {
            all = contains_ptr(stores, nstores, PySequence_Fast_GET_ITEM(seq, i));
        }
        Py_DECREF(seq);
        if (!all) {
            break;
        }
        if (*njoined >= MAX_LEVELS) {
            Py_DECREF(level);
            return 1;  /* (more levels than this call holds: the Python path) */
        }
        joined[(*njoined)++] = level;  /* (the reference moves to `joined`) */
        level = PyObject_GetAttr(level, nm->inner);
        if (level == NULL) {
            return -1;
        }
    }
    Py_DECREF(level);
    return 0;
}

PyDoc_STRVAR(insert_entity_doc,
"insert_entity(stores, key, slot, values, item, chunk_rows) -> bool\n\n"
"Add rows for one new entity (`key`, its `slot`; in none of the stores yet) to each of\n"
"`stores` (a list of distinct ComponentStores), joining the owning groups whose types\n"
"it has (World._spawn_rows): in each store it takes the row past each joined level's\n"
"prefix, innermost first, whose row moves out a level (ComponentStore.insert_chain),\n"
"and the levels grow by one. Then `values[j]` goes to the entity's row of `stores[j]`:\n"
"a tuple (one structured item assignment), or a component whose `_write_row(data, row,\n"
"item)` writes it. False, with nothing changed but maybe a store's capacity, when a\n"
"store is not as ComponentStore keeps it: the Python path then does the job.");

static PyObject *
insert_entity(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    State *st = state_of(module);
    Names *nm = &st->names;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "insert_entity takes 6 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *stores_list = args[0], *values = args[3];
    if (!PyList_CheckExact(stores_list) || !PyList_CheckExact(values)
            || PyList_GET_SIZE(values) != PyList_GET_SIZE(stores_list)) {
        PyErr_SetString(PyExc_TypeError,
                        "insert_entity: stores and values must be lists of one length");
        return NULL;
    }
    unsigned long long key = PyLong_AsUnsignedLongLong(args[1]);
    Py_ssize_t slot = PyLong_AsSsize_t(args[2]);
    Py_ssize_t item = PyLong_AsSsize_t(args[4]);
    Py_ssize_t chunk_rows = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (slot < 0 || (unsigned long long)slot != (key & SLOT_MASK) || chunk_rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "insert_entity: slot must be the key's slot "
                        "and chunk_rows positive");
        return NULL;
    }
    Py_ssize_t nstores = PyList_GET_SIZE(stores_list);
    if (nstores > MAX_STORES) {
        Py_RETURN_FALSE;
    }
    PyObject *stores[MAX_STORES];
    for (Py_ssize_t j = 0; j < nstores; j++) {
        stores[j] = PyList_GET_ITEM(stores_list, j);
    }
    PyObject *result = NULL;
    PyObject *joined[MAX_LEVELS];
    Py_ssize_t njoined = 0;
    Rows rows[MAX_STORES];
    Py_ssize_t opened = 0;
    /* per store: the joined levels' sizes that apply to it, innermost first */
    Py_ssize_t ats[MAX_STORES][MAX_LEVELS];
    int nats[MAX_STORES];
    Py_ssize_t placed[MAX_STORES];  /* the entity's row in each store, once moved */
    PyObject *roots[MAX_LEVELS];
    Py_ssize_t nroots = 0;
    PyObject *owners[MAX_STORES];
    Py_ssize_t nowners = 0;

    /* The levels the entity joins (every store of theirs is given), per root. */
    for (Py_ssize_t j = 0; j < nstores; j++) {
        PyObject *owner = PyObject_GetAttr(stores[j], nm->owner);
        if (owner == NULL) {
            goto done;
        }
        owners[nowners++] = owner;
        if (owner != Py_None) {
            PyObject *root = PyObject_GetAttr(owner, nm->root);
            if (root == NULL) {
                goto done;
            }
            int seen = contains_ptr(roots, nroots, root);
            if (!seen && nroots >= MAX_LEVELS) {
                Py_DECREF(root);
                result = Py_NewRef(Py_False);
                goto done;
            }
            if (!seen) {
                roots[nroots++] = root;  /* (kept alive by the store's owner chain) */
                int got = join_levels(st, stores, nstores, root, joined, &njoined);
                if (got != 0) {
                    Py_DECREF(root);
                    if (got > 0) {
                        result = Py_NewRef(Py_False);
                    }
                    goto done;
                }
            }
            Py_DECREF(root);
        }
    }
    Py_ssize_t sizes[MAX_LEVELS], depths[MAX_LEVELS];
    PyObject *level_roots[MAX_LEVELS];
    for (Py_ssize_t i = 0; i < njoined; i++) {
        int got = ssize_attr(joined[i], nm->size, &sizes[i]);
        if (got > 0) {
            got = ssize_attr(joined[i], nm->depth, &depths[i]);
        }
        if (got <= 0) {
            if (got == 0) {
                result = Py_NewRef(Py_False);
            }
            goto done;
        }
        PyObject *root = PyObject_GetAttr(joined[i], nm->root);
        if (root == NULL) {
            goto done;
        }
        level_roots[i] = root;  /* (borrowed: the level holds its root) */
        Py_DECREF(root);
    }

    /* Each store's positions (group.insert_positions) and arrays, checked. */
    for (Py_ssize_t j = 0; j < nstores; j++) {
        nats[j] = 0;
        Py_ssize_t at_owner = -1;
        for (Py_ssize_t i = 0; i < njoined; i++) {
            if (joined[i] == owners[j]) {
                at_owner = i;
            }
        }
        if (at_owner >= 0) {
            for (Py_ssize_t i = njoined - 1; i >= 0; i--) {
                if (level_roots[i] == level_roots[at_owner] && depths[i] >= depths[at_owner]) {
                    ats[j][nats[j]++] = sizes[i];
                }
            }
        }
        int got = open_rows(st, stores[j], &rows[j]);
        if (got > 0 && rows[j].n >= rows[j].capacity) {
            /* ComponentStore.reserve, as append_one calls it (new arrays: taken again) */
            PyObject *wanted = PyLong_FromSsize_t(rows[j].n + 1);
            release_rows(&rows[j]);
            PyObject *reserved = wanted == NULL ? NULL : PyObject_CallMethodOneArg(
                stores[j], nm->reserve, wanted);
            Py_XDECREF(wanted);
            if (reserved == NULL) {
                goto done;
            }
            Py_DECREF(reserved);
            got = open_rows(st, stores[j], &rows[j]);
        }
        if (got <= 0) {
            if (got == 0) {
                result = Py_NewRef(Py_False);
            }
            goto done;
        }
        opened++;
        Rows *r = &rows[j];
        int fits = r->n < r->capacity && slot < r->slots && r->index[slot] < 0
                   && r->n / chunk_rows < r->nchunks;
        for (int i = 0; i < nats[j] && fits; i++) {  /* (rows at the sizes move out) */
            fits = (ats[j][i] == r->n || movable(r, ats[j][i]))
                   && (i == 0 || ats[j][i] >= ats[j][i - 1]);
        }
        if (!fits) {
            result = Py_NewRef(Py_False);
            goto done;
        }
    }

    /* Move: in each store the hole travels from the end in to the innermost level's
     * prefix end (ComponentStore.insert_chain / insert_one / append_one). */
    for (Py_ssize_t j = 0; j < nstores; j++) {
        Rows *r = &rows[j];
        Py_ssize_t end = r->n, hole = end;
        for (int i = nats[j] - 1; i >= 0; i--) {
            if (ats[j][i] != hole) {
                move_row(r, hole, ats[j][i]);
                hole = ats[j][i];
            }
        }
        r->keys[hole] = (uint64_t)key;  /* (its values are written below) */
        r->index[slot] = (int32_t)hole;
        if (set_ssize_attr(r->store, nm->n, end + 1) < 0) {
            goto done;
        }
        Py_ssize_t touched[MAX_LEVELS + 2];
        int count = 0;
        touched[count++] = hole;
        touched[count++] = end;
        for (int i = 0; i < nats[j]; i++) {
            touched[count++] = ats[j][i];
        }
        if (touch_layout(st, r, touched, count, chunk_rows) < 0) {
            goto done;
        }
        placed[j] = hole;
    }
    for (Py_ssize_t i = 0; i < njoined; i++) {
        if (set_group_size(st, joined[i], sizes[i] + 1) < 0) {
            goto done;
        }
    }

    /* Write the values. */
    for (Py_ssize_t j = 0; j < nstores; j++) {
        PyObject *value = PyList_GET_ITEM(values, j);
        PyObject *row = PyLong_FromSsize_t(placed[j]);
        if (row == NULL) {
            goto done;
        }
        int done_write;
        if (PyTuple_CheckExact(value)) {
            done_write = PyObject_SetItem((PyObject *)rows[j].data, row, value);
        }
        else {
            PyObject *boxed_item = PyLong_FromSsize_t(item);
            PyObject *call[4] = {value, (PyObject *)rows[j].data, row, boxed_item};
            PyObject *written = boxed_item == NULL ? NULL : PyObject_VectorcallMethod(
                nm->write_row, call, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            Py_XDECREF(boxed_item);
            done_write = written == NULL ? -1 : 0;
            Py_XDECREF(written);
        }
        Py_DECREF(row);
        if (done_write < 0) {
            goto done;
        }
    }
    result = Py_NewRef(Py_True);

done:
    for (Py_ssize_t j = 0; j < opened; j++) {
        release_rows(&rows[j]);
    }
    for (Py_ssize_t i = 0; i < njoined; i++) {
        Py_DECREF(joined[i]);
    }
    for (Py_ssize_t j = 0; j < nowners; j++) {
        Py_DECREF(owners[j]);
    }
    return result;
}

/* ------------------------------------------------------------------ remove_entity */

/* Group.remove_one of the entity in group row `row` (its `slot`) of `owner`'s chain:
 * from every store of every level it is in, each level's last row filling the hole,
 * which moves out level by level, the store's last row filling the last one
 * (ComponentStore.remove_chain; remove_group_one for one level). `rows` are the world's
 * opened stores. 1, 0 (nothing changed) when something does not match or the levels and
 * their stores are more than this call holds, or -1. With `check_only`: 1 or 0 as the
 * removal would give, nothing moved. */
static int
remove_from_groups(State *st, PyObject *owner, Py_ssize_t row, Py_ssize_t slot,
                   Rows *rows, Py_ssize_t nrows, Py_ssize_t chunk_rows, int check_only)
{
    Names *nm = &st->names;
    PyObject *root = PyObject_GetAttr(owner, nm->root);
    PyObject *levels_obj = root == NULL ? NULL : PyObject_GetAttr(root, nm->levels);
    Py_XDECREF(root);
    PyObject *levels = levels_obj == NULL ? NULL : PySequence_Fast(levels_obj, "levels");
    Py_XDECREF(levels_obj);
    if (levels == NULL) {
        return -1;
    }
    int result = -1;
    Py_ssize_t nlevels = PySequence_Fast_GET_SIZE(levels);
    Py_ssize_t lasts[MAX_LEVELS];  /* the last row of each level it is in, outer first */
    Py_ssize_t depth_in = 0;
    for (; depth_in < nlevels; depth_in++) {
        Py_ssize_t size;
        int got = ssize_attr(PySequence_Fast_GET_ITEM(levels, depth_in), nm->size, &size);
        if (got <= 0) {
            result = got;
            goto done;
        }
        if (row >= size) {
            break;
        }
        if (depth_in >= MAX_LEVELS) {
            result = 0;
            goto done;
        }
        lasts[depth_in] = size - 1;
    }
    /* The stores: each level's own stores hold the levels from it inward. Checked
     * first, then moved. */
    Rows *held[MAX_STORES];
    int held_depth[MAX_STORES];
    Py_ssize_t nheld = 0;
    for (Py_ssize_t depth = 0; depth < depth_in; depth++) {
        PyObject *own = PyObject_GetAttr(PySequence_Fast_GET_ITEM(levels, depth), nm->own);
        PyObject *seq = own == NULL ? NULL : PySequence_Fast(own, "Group.own");
        Py_XDECREF(own);
        if (seq == NULL) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *store = PySequence_Fast_GET_ITEM(seq, i);
            Rows *r = NULL;
            for (Py_ssize_t k = 0; k < nrows; k++) {
                if (rows[k].store == store) {
                    r = &rows[k];
                }
            }
            int fits = r != NULL && nheld < MAX_STORES && r->index[slot] == row
                       && movable(r, r->n - 1);
            for (Py_ssize_t d = depth; d < depth_in && fits; d++) {
                fits = movable(r, lasts[d]);
            }
            if (!fits) {
                Py_DECREF(seq);
                result = 0;  /* (a level's store the world does not list, or out of step) */
                goto done;
            }
            held[nheld] = r;
            held_depth[nheld++] = (int)depth;
        }
        Py_DECREF(seq);
    }
    if (check_only) {
        result = 1;
        goto done;
    }
    for (Py_ssize_t h = 0; h < nheld; h++) {
        Rows *r = held[h];
        Py_ssize_t end = r->n - 1, hole = row;
        r->index[slot] = -1;
        Py_ssize_t touched[MAX_LEVELS + 2];
        int count = 0;
        touched[count++] = row;
        touched[count++] = end;
        /* innermost first: the levels from this store's level inward */
        for (Py_ssize_t d = depth_in - 1; d >= held_depth[h]; d--) {
            Py_ssize_t last = lasts[d];
            if (last != hole) {
                move_row(r, hole, last);
                hole = last;
            }
            touched[count++] = last;
        }
        if (hole != end) {
            move_row(r, hole, end);
        }
        if (set_ssize_attr(r->store, nm->n, end) < 0
                || touch_layout(st, r, touched, count, chunk_rows) < 0) {
            goto done;
        }
        r->n = end;
    }
    for (Py_ssize_t depth = 0; depth < depth_in; depth++) {
        if (set_group_size(st, PySequence_Fast_GET_ITEM(levels, depth), lasts[depth]) < 0) {
            goto done;
        }
    }
    result = 1;
done:
    Py_DECREF(levels);
    return result;
}

PyDoc_STRVAR(remove_entity_doc,
"remove_entity(stores, slot, chunk_rows) -> bool\n\n"
"Remove the rows of the entity in `slot` from every store of `stores` (a world's\n"
"ComponentStores, e.g. its dict's values) that holds it (World._destroy_one): a member\n"
"of an owning group leaves every level it is in (Group.remove_one), other rows are\n"
"swap-removed (ComponentStore.remove_one). Its slot stays allocated: the caller\n"
"releases it. False, with nothing changed, when a store is not as ComponentStore keeps\n"
"it: the Python path then does the job.");

static PyObject *
remove_entity(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    State *st = state_of(module);
    Names *nm = &st->names;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "remove_entity takes 3 arguments, got %zd", nargs);
        return NULL;
    }
    Py_ssize_t slot = PyLong_AsSsize_t(args[1]);
    Py_ssize_t chunk_rows = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (slot < 0 || slot > (Py_ssize_t)SLOT_MASK || chunk_rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "remove_entity: bad slot or chunk_rows");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "remove_entity: stores must be iterable");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t nstores = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL;
    Rows *rows = PyMem_New(Rows, nstores ? nstores : 1);
    Py_ssize_t opened = 0;
    if (rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* First the stores that hold the entity (an index lookup per store), checked. */
    for (Py_ssize_t j = 0; j < nstores; j++) {
        PyObject *store = PySequence_Fast_GET_ITEM(seq, j);
        PyArrayObject *sparse;
        int got = array_attr(store, nm->sparse, NPY_INT32, &sparse);
        if (got <= 0) {
            if (got == 0) {
                result = Py_NewRef(Py_False);
            }
            goto done;
        }
        int32_t row = slot < PyArray_DIM(sparse, 0) ? ((int32_t *)PyArray_DATA(sparse))[slot]
                                                    : -1;
        Py_DECREF(sparse);
        if (row < 0) {
            continue;
        }
        got = open_rows(st, store, &rows[opened]);
        if (got <= 0) {
            if (got == 0) {
                result = Py_NewRef(Py_False);
            }
            goto done;
        }
        Rows *r = &rows[opened++];
        if (row >= r->n || slot >= r->slots || r->index[slot] != row
                || (r->keys[row] & SLOT_MASK) != (uint64_t)slot || !movable(r, r->n - 1)
                || (r->n - 1) / chunk_rows >= r->nchunks) {
            result = Py_NewRef(Py_False);
            goto done;
        }
    }
    /* Which stores it leaves through a group (in the group's prefix), and those groups
     * checked whole (their levels and stores) before any row moves: a store outside
     * them may come first. */
    for (Py_ssize_t j = 0; j < opened; j++) {
        Rows *r = &rows[j];
        PyObject *owner = PyObject_GetAttr(r->store, nm->owner);
        if (owner == NULL) {
            goto done;
        }
        Py_ssize_t group_size = 0;
        int got = owner == Py_None ? 1 : ssize_attr(r->store, nm->group_size, &group_size);
        if (got > 0 && owner != Py_None && r->index[slot] < group_size) {
            got = remove_from_groups(st, owner, r->index[slot], slot, rows, opened,
                                     chunk_rows, 1);
            r->group = Py_NewRef(owner);
        }
        Py_DECREF(owner);
        if (got <= 0) {
            if (got == 0) {
                result = Py_NewRef(Py_False);
            }
            goto done;
        }
    }
    /* Then remove, store by store as World._destroy_one does. */
    for (Py_ssize_t j = 0; j < opened; j++) {
        Rows *r = &rows[j];
        if (r->index[slot] < 0) {  /* (its group took it out already) */
            continue;
        }
        Py_ssize_t row = r->index[slot];
        if (r->group != NULL) {
            int got = remove_from_groups(st, r->group, row, slot, rows, opened, chunk_rows,
                                         0);
            if (got <= 0) {
                if (got == 0) {  /* (checked above: only a store changed meanwhile) */
                    PyErr_SetString(PyExc_SystemError, "remove_entity: a group's stores "
                                    "are out of step");
                }
                goto done;
            }
            continue;
        }
        Py_ssize_t last = r->n - 1;  /* ComponentStore.remove_one */
        r->index[slot] = -1;
        if (row != last) {
            move_row(r, row, last);
        }
        Py_ssize_t touched[2] = {row, last};
        if (set_ssize_attr(r->store, nm->n, last) < 0
                || touch_layout(st, r, touched, 2, chunk_rows) < 0) {
            goto done;
        }
        r->n = last;
    }
    result = Py_NewRef(Py_True);
done:
    for (Py_ssize_t j = 0; j < opened; j++) {
        release_rows(&rows[j]);
    }
    PyMem_Free(rows);
    Py_DECREF(seq);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef entityrows_methods[] = {
    {"insert_entity", (PyCFunction)(void (*)(void))insert_entity, METH_FASTCALL,
     insert_entity_doc},
    {"remove_entity", (PyCFunction)(void (*)(void))remove_entity, METH_FASTCALL,
     remove_entity_doc},
    {NULL, NULL, 0, NULL},
};

static int
entityrows_exec(PyObject *module)
{
    if (PyArray_ImportNumPyAPI() < 0) {
        return -1;
    }
    Names *nm = &state_of(module)->names;
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&nm->n, "n"}, {&nm->data, "data"}, {&nm->entities, "entities"},
        {&nm->sparse, "sparse"}, {&nm->chunks, "_chunk_versions"}, {&nm->owner, "owner"},
        {&nm->group_size, "group_size"}, {&nm->versions, "_versions"},
        {&nm->clock, "clock"}, {&nm->stamp, "stamp"},
        {&nm->layout_version, "layout_version"}, {&nm->data_version, "data_version"},
        {&nm->reserve, "reserve"}, {&nm->write_row, "_write_row"}, {&nm->root, "root"},
        {&nm->inner, "inner"}, {&nm->levels, "levels"}, {&nm->own, "own"},
        {&nm->stores, "stores"}, {&nm->size, "size"}, {&nm->depth, "depth"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) {
            return -1;
        }
    }
    return 0;
}

static int
entityrows_traverse(PyObject *module, visitproc visit, void *arg)
{
    (void)module;
    (void)visit;
    (void)arg;
    return 0;  /* (interned strings only: no cycles) */
}

static void
entityrows_free(void *module)
{
    Names *nm = &state_of((PyObject *)module)->names;
    PyObject **all = (PyObject **)nm;
    for (size_t i = 0; i < sizeof(Names) / sizeof(PyObject *); i++) {
        Py_CLEAR(all[i]);
    }
}

static PyModuleDef_Slot entityrows_slots[] = {
    {Py_mod_exec, entityrows_exec},
    {0, NULL},
};

static struct PyModuleDef entityrows_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ecs_engine._entityrows",
    .m_doc = "One entity's rows added to or removed from every store in one call "
             "(see world.py).",
    .m_size = sizeof(State),
    .m_methods = entityrows_methods,
    .m_slots = entityrows_slots,
    .m_traverse = entityrows_traverse,
    .m_free = entityrows_free,
};

PyMODINIT_FUNC
PyInit__entityrows(void)
{
    return PyModuleDef_Init(&entityrows_module);
}
