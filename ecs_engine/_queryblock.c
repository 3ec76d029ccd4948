/* Opening and closing a query block without a Python frame (see queryblock.py).
 *
 * `with world.query(A, B) as q:` makes three Python calls: World.query, Query.__enter__
 * and Query.__exit__. Their common case is a handful of attribute reads and writes (the
 * plan's last query, a stamp compare, a counter), but each Python call costs about as
 * much as esper's whole cached get_components. Here those common cases run in C, reading
 * and writing the same __slots__ the Python code uses, at the offsets of their member
 * descriptors; anything else (a nested block, a plan to re-resolve, columns to release,
 * an exception, keyword arguments) calls the Python method, which does the whole job.
 * Optional: an install without a C compiler runs the Python methods, the same behaviour.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
/* Only the array struct and its flags (no numpy C-API table: nothing to import). */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>

typedef struct {
    int configured;
    PyTypeObject *query_type, *plan_type, *clock_type, *state_type;
    Py_ssize_t q_world, q_in, q_depth, q_plan, q_entities, q_cache, q_writable, q_gathered;
    Py_ssize_t p_stamp, p_clock, p_aligned, p_settled, p_entities, p_idle;
    Py_ssize_t c_stamp;
    Py_ssize_t w_open, w_deferred, w_plans;
    PyObject *no_keys, *slow_enter, *slow_exit, *slow_query, *flush_name, *zero;
    PyObject *setflags_name, *write_kw, *without_name, *readonly_name, *empty;
    /* the columns' fast paths (configure_columns) */
    int columns_configured;
    PyTypeObject *store_type, *array_type;
    Py_ssize_t p_rows, p_store_of, p_readonly;
    Py_ssize_t p_prefix, p_prefix_lead, p_prefix_keys, p_prefix_size, p_stores;
    Py_ssize_t p_types, p_without, p_layouts, p_signature, p_within;
    long chunk_rows;
    PyObject *slow_getitem, *slow_unstructured;
    PyObject *data_name, *frozen_name, *flat_name, *frozen_flat_name, *versions_name;
    PyObject *data_version_name, *chunk_marks_name, *mark_chunks_name;
    PyObject *entities_name, *n_name, *owner_name, *group_size_name;
    PyObject *layout_version_name, *stores_name;
} State;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

static void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    Py_INCREF(value);
    SLOT(obj, offset) = value;
    Py_XDECREF(old);
}

/* The offset of `type`'s writable object slot `name` (a __slots__ entry); -1 and an
 * exception when it is not one. */
static Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL) {
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY)) {
            offset = member->offset;
        }
    }
    Py_DECREF(descr);
    if (offset < 0) {
        PyErr_Format(PyExc_TypeError, "configure: %s.%s is not a __slots__ entry",
                     type->tp_name, name);
    }
    return offset;
}

static int
state_traverse(PyObject *module, visitproc visit, void *arg)
{
    State *st = PyModule_GetState(module);
    Py_VISIT(st->query_type);
    Py_VISIT(st->plan_type);
    Py_VISIT(st->clock_type);
    Py_VISIT(st->state_type);
    Py_VISIT(st->no_keys);
    Py_VISIT(st->slow_enter);
    Py_VISIT(st->slow_exit);
    Py_VISIT(st->slow_query);
    Py_VISIT(st->store_type);
    Py_VISIT(st->array_type);
    Py_VISIT(st->slow_getitem);
    Py_VISIT(st->slow_unstructured);
    return 0;
}

static void
clear_columns(State *st)
{
    st->columns_configured = 0;
    Py_CLEAR(st->store_type);
    Py_CLEAR(st->array_type);
    Py_CLEAR(st->slow_getitem);
    Py_CLEAR(st->slow_unstructured);
    Py_CLEAR(st->data_name);
    Py_CLEAR(st->frozen_name);
    Py_CLEAR(st->flat_name);
    Py_CLEAR(st->frozen_flat_name);
    Py_CLEAR(st->versions_name);
    Py_CLEAR(st->data_version_name);
    Py_CLEAR(st->chunk_marks_name);
    Py_CLEAR(st->mark_chunks_name);
    Py_CLEAR(st->entities_name);
    Py_CLEAR(st->n_name);
    Py_CLEAR(st->owner_name);
    Py_CLEAR(st->group_size_name);
    Py_CLEAR(st->layout_version_name);
    Py_CLEAR(st->stores_name);
}

static int
state_clear(PyObject *module)
{
    State *st = PyModule_GetState(module);
    st->configured = 0;
    Py_CLEAR(st->query_type);
    Py_CLEAR(st->plan_type);
    Py_CLEAR(st->clock_type);
    Py_CLEAR(st->state_type);
    Py_CLEAR(st->no_keys);
    Py_CLEAR(st->slow_enter);
    Py_CLEAR(st->slow_exit);
    Py_CLEAR(st->slow_query);
    Py_CLEAR(st->flush_name);
    Py_CLEAR(st->zero);
    Py_CLEAR(st->setflags_name);
    Py_CLEAR(st->write_kw);
    Py_CLEAR(st->without_name);
    Py_CLEAR(st->readonly_name);
    Py_CLEAR(st->empty);
    clear_columns(st);
    return 0;
}

static void
state_free(void *module)
{
    state_clear((PyObject *)module);
}

PyDoc_STRVAR(configure_doc,
"configure(query_type, plan_type, clock_type, state_type, no_keys, slow_enter,\n"
"          slow_exit, slow_query)\n\n"
"Name the classes whose slots the fast paths read (Query, QueryPlan, LayoutClock and\n"
"World's slotted base), the empty key array of a fresh query, and the Python methods\n"
"that do the whole job when a fast path does not apply. Once, from queryblock.py.");

static PyObject *
configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    State *st = PyModule_GetState(module);
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "configure takes 8 arguments, got %zd", nargs);
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        if (!PyType_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "configure: the first four arguments are types");
            return NULL;
        }
    }
    PyTypeObject *q = (PyTypeObject *)args[0], *p = (PyTypeObject *)args[1];
    PyTypeObject *c = (PyTypeObject *)args[2], *w = (PyTypeObject *)args[3];
    struct { Py_ssize_t *at; PyTypeObject *type; const char *name; } slots[] = {
        {&st->q_world, q, "_world"}, {&st->q_in, q, "_in"}, {&st->q_depth, q, "_depth"},
        {&st->q_plan, q, "_plan"}, {&st->q_entities, q, "entities"},
        {&st->q_cache, q, "_cache"}, {&st->q_writable, q, "_writable"},
        {&st->q_gathered, q, "_gathered"},
        {&st->p_stamp, p, "_stamp"}, {&st->p_clock, p, "_clock"},
        {&st->p_aligned, p, "aligned"}, {&st->p_settled, p, "settled"},
        {&st->p_entities, p, "entities"}, {&st->p_idle, p, "idle"},
        {&st->c_stamp, c, "stamp"},
        {&st->w_open, w, "_open_queries"}, {&st->w_deferred, w, "_deferred"},
        {&st->w_plans, w, "_plans"}};
    enum { NSLOTS = sizeof(slots) / sizeof(slots[0]) };
    Py_ssize_t offsets[NSLOTS];
    for (size_t i = 0; i < NSLOTS; i++) {  /* all found before any is used */
        offsets[i] = slot_offset(slots[i].type, slots[i].name);
        if (offsets[i] < 0) {
            return NULL;
        }
    }
    state_clear(module);
    for (size_t i = 0; i < NSLOTS; i++) {
        *slots[i].at = offsets[i];
    }
    st->flush_name = PyUnicode_InternFromString("_flush");
    st->zero = PyLong_FromLong(0);
    st->setflags_name = PyUnicode_InternFromString("setflags");
    st->write_kw = Py_BuildValue("(s)", "write");
    st->without_name = PyUnicode_InternFromString("without");
    st->readonly_name = PyUnicode_InternFromString("readonly");
    st->empty = PyTuple_New(0);
    if (st->flush_name == NULL || st->zero == NULL || st->setflags_name == NULL
            || st->write_kw == NULL || st->without_name == NULL || st->readonly_name == NULL
            || st->empty == NULL) {
        return NULL;
    }
    PyObject **keep[] = {(PyObject **)&st->query_type, (PyObject **)&st->plan_type,
                         (PyObject **)&st->clock_type, (PyObject **)&st->state_type,
                         &st->no_keys, &st->slow_enter, &st->slow_exit, &st->slow_query};
    for (int i = 0; i < 8; i++) {
        Py_INCREF(args[i]);
        *keep[i] = args[i];
    }
    st->configured = 1;
    Py_RETURN_NONE;
}

/* The module's state once configure() ran; NULL and a RuntimeError before. */
static State *
configured_state(PyObject *module)
{
    State *st = PyModule_GetState(module);
    if (!st->configured) {
        PyErr_SetString(PyExc_RuntimeError, "ecs_engine._queryblock is not configured");
        return NULL;
    }
    return st;
}

PyDoc_STRVAR(configure_columns_doc,
"configure_columns(store_type, array_type, chunk_rows, slow_getitem, slow_unstructured)\n\n"
"Name the store class whose attributes the column fast paths and the prefix-plan check\n"
"read (ComponentStore), numpy's ndarray, the rows per versioned chunk of a store, and the\n"
"Python methods that do the whole job when a fast path does not apply (Query.__getitem__\n"
"and Query.unstructured). After configure(), from queryblock.py.");

static PyObject *
configure_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    State *st = configured_state(module);
    if (st == NULL) {
        return NULL;
    }
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "configure_columns takes 5 arguments, got %zd", nargs);
        return NULL;
    }
    if (!PyType_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_columns: the first two arguments are types");
        return NULL;
    }
    long chunk_rows = PyLong_AsLong(args[2]);
    if (chunk_rows == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (chunk_rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "configure_columns: chunk_rows must be > 0");
        return NULL;
    }
    struct { Py_ssize_t *at; const char *name; } slots[] = {
        {&st->p_rows, "rows"}, {&st->p_store_of, "store_of"}, {&st->p_readonly, "readonly"},
        {&st->p_prefix, "_prefix"}, {&st->p_prefix_lead, "_prefix_lead"},
        {&st->p_prefix_keys, "_prefix_keys"}, {&st->p_prefix_size, "_prefix_size"},
        {&st->p_stores, "stores"}, {&st->p_types, "types"}, {&st->p_without, "without"},
        {&st->p_layouts, "_layouts"}, {&st->p_signature, "_signature"},
        {&st->p_within, "_within"}};
    enum { NSLOTS = sizeof(slots) / sizeof(slots[0]) };
    Py_ssize_t offsets[NSLOTS];
    for (size_t i = 0; i < NSLOTS; i++) {  /* all found before any is used */
        offsets[i] = slot_offset(st->plan_type, slots[i].name);
        if (offsets[i] < 0) {
            return NULL;
        }
    }
    clear_columns(st);
    for (size_t i = 0; i < NSLOTS; i++) {
        *slots[i].at = offsets[i];
    }
    st->chunk_rows = chunk_rows;
    struct { PyObject **at; const char *name; } names[] = {
        {&st->data_name, "data"}, {&st->frozen_name, "frozen"}, {&st->flat_name, "flat"},
        {&st->frozen_flat_name, "frozen_flat"}, {&st->versions_name, "_versions"},
        {&st->data_version_name, "data_version"}, {&st->chunk_marks_name, "chunk_marks"},
        {&st->mark_chunks_name, "_mark_chunks"}, {&st->entities_name, "entities"},
        {&st->n_name, "n"}, {&st->owner_name, "owner"}, {&st->group_size_name, "group_size"},
        {&st->layout_version_name, "layout_version"}, {&st->stores_name, "stores"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i].at = PyUnicode_InternFromString(names[i].name);
        if (*names[i].at == NULL) {
            clear_columns(st);
            return NULL;
        }
    }
    PyObject **keep[] = {(PyObject **)&st->store_type, (PyObject **)&st->array_type, NULL,
                         &st->slow_getitem, &st->slow_unstructured};
    for (int i = 0; i < 5; i++) {
        if (keep[i] != NULL) {
            Py_INCREF(args[i]);
            *keep[i] = args[i];
        }
    }
    st->columns_configured = 1;
    Py_RETURN_NONE;
}

/* The module's state once configure_columns() ran; NULL and a RuntimeError before. */
static State *
columns_state(PyObject *module)
{
    State *st = configured_state(module);
    if (st != NULL && !st->columns_configured) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ecs_engine._queryblock's columns are not configured");
        return NULL;
    }
    return st;
}

/* What a column's fast path needs: its store and its rows, one slice [start, stop) of
 * the store's rows (an aligned plan's), and whether the query reads it only. */
typedef struct {
    PyObject *store, *rows, *writable;  /* strong references (release_column) */
    long start, stop;
    int readonly;
} Column;

static void
release_column(Column *col)
{
    Py_CLEAR(col->store);
    Py_CLEAR(col->rows);
    Py_CLEAR(col->writable);
}

/* Fill `col` for q[ctype] inside q's open block when the rows are a plain slice of a
 * ComponentStore's: 1; 0 (nothing held, no exception) when the fast path does not apply
 * (the Python method then does the whole job, errors included). */
static int
find_column(State *st, PyObject *q, PyObject *ctype, Column *col)
{
    col->store = col->rows = col->writable = NULL;
    if (Py_TYPE(q) != st->query_type) {
        return 0;
    }
    PyObject *open = SLOT(q, st->q_in), *plan = SLOT(q, st->q_plan);
    if (open == NULL || open == Py_None || plan == NULL || Py_TYPE(plan) != st->plan_type) {
        return 0;
    }
    PyObject *rows_of = SLOT(plan, st->p_rows), *store_of = SLOT(plan, st->p_store_of);
    PyObject *readonly = SLOT(plan, st->p_readonly), *writable = SLOT(q, st->q_writable);
    if (rows_of == NULL || !PyDict_CheckExact(rows_of) || store_of == NULL
            || !PyDict_CheckExact(store_of) || readonly == NULL
            || !PyFrozenSet_CheckExact(readonly) || writable == NULL
            || !PyList_CheckExact(writable)) {
        return 0;
    }
    /* (held through the lookups: hashing or comparing a key may run Python code, which
     * may replace any of them, e.g. close the block) */
    Py_INCREF(rows_of);
    Py_INCREF(store_of);
    Py_INCREF(readonly);
    Py_INCREF(writable);
    PyObject *rows = PyDict_GetItemWithError(rows_of, ctype);
    Py_XINCREF(rows);
    PyObject *store = rows == NULL ? NULL : PyDict_GetItemWithError(store_of, ctype);
    Py_XINCREF(store);
    int ro = store == NULL ? -1 : PySet_Contains(readonly, ctype);
    Py_DECREF(rows_of);
    Py_DECREF(store_of);
    Py_DECREF(readonly);
    if (ro < 0 || Py_TYPE(store) != st->store_type || Py_TYPE(rows) != &PySlice_Type
            || writable != SLOT(q, st->q_writable) || SLOT(q, st->q_in) != open
            || SLOT(q, st->q_plan) != plan) {
        goto pass;  /* (also when that code changed the block: Python does it all) */
    }
    PySliceObject *slice = (PySliceObject *)rows;
    if (slice->step != Py_None || !PyLong_CheckExact(slice->start)
            || !PyLong_CheckExact(slice->stop)) {
        goto pass;  /* (a gathered query's run, or rows given as an index array) */
    }
    long start = PyLong_AsLong(slice->start), stop = PyLong_AsLong(slice->stop);
    if (PyErr_Occurred() || start < 0 || stop < 0) {
        goto pass;
    }
    col->store = store;
    col->rows = rows;
    col->writable = writable;
    col->start = start;
    col->stop = stop;
    col->readonly = ro;
    return 1;
pass:
    PyErr_Clear();
    Py_XDECREF(rows);
    Py_XDECREF(store);
    Py_DECREF(writable);
    return 0;
}

/* ComponentStore.touch_rows(start, stop) (start < stop): a new data version for the
 * store, marked on the chunks holding the rows. 0, or -1 with an exception set. */
static int
touch_rows(State *st, PyObject *store, long start, long stop)
{
    PyObject *versions = PyObject_GetAttr(store, st->versions_name);
    if (versions == NULL) {
        return -1;
    }
    if (!PyIter_Check(versions)) {
        PyErr_Format(PyExc_TypeError, "'%.200s' object is not an iterator",
                     Py_TYPE(versions)->tp_name);
        Py_DECREF(versions);
        return -1;
    }
    PyObject *version = PyIter_Next(versions);
    Py_DECREF(versions);
    if (version == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetNone(PyExc_StopIteration);
        }
        return -1;
    }
    int done = PyObject_SetAttr(store, st->data_version_name, version);
    long first = start / st->chunk_rows, last = (stop - 1) / st->chunk_rows;
    if (done == 0 && first == last) {  /* one chunk: one item store, as in Python */
        PyObject *marks = PyObject_GetAttr(store, st->chunk_marks_name);
        PyObject *index = marks == NULL ? NULL : PyLong_FromLong(first);
        done = index == NULL ? -1 : PyObject_SetItem(marks, index, version);
        Py_XDECREF(index);
        Py_XDECREF(marks);
    }
    else if (done == 0) {
        PyObject *from = PyLong_FromLong(start), *to = PyLong_FromLong(stop);
        PyObject *marked = NULL;
        if (from != NULL && to != NULL) {
            PyObject *call[4] = {store, from, to, version};
            marked = PyObject_VectorcallMethod(st->mark_chunks_name, call,
                                               4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        done = marked == NULL ? -1 : 0;
        Py_XDECREF(marked);
        Py_XDECREF(from);
        Py_XDECREF(to);
    }
    Py_DECREF(version);
    return done;
}

/* An aligned plan's view of ctype's store for q's open block: a slice of the store's
 * array `frozen_name` when the query reads it only, else of `name` (data or flat), which
 * goes on the block's list of columns to make read-only at its end and counts as a write
 * to its rows (as in Python). A new reference; NULL and no exception when the fast path
 * does not apply (the Python method then does the whole job), NULL and an exception on
 * an error. */
static PyObject *
aligned_view(State *st, PyObject *q, PyObject *ctype, PyObject *frozen_name,
             PyObject *name)
{
    Column col;
    if (!find_column(st, q, ctype, &col)) {
        return NULL;
    }
    PyObject *view = NULL, *source = PyObject_GetAttr(col.store,
                                                      col.readonly ? frozen_name : name);
    if (source != NULL && Py_TYPE(source) == st->array_type) {  /* (else: Python's path) */
        view = PyObject_GetItem(source, col.rows);
    }
    Py_XDECREF(source);
    if (view != NULL && !col.readonly
            && (PyList_Append(col.writable, view) < 0
                || (col.stop > col.start
                    && touch_rows(st, col.store, col.start, col.stop) < 0))) {
        Py_CLEAR(view);
    }
    release_column(&col);
    return view;
}

/* Query.__getitem__: a column the block took already, or one of an aligned plan's (a
 * view of the store; a writable one counts as a write to its rows, as in Python). */
static PyObject *
column(PyObject *module, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *st = columns_state(module);
    if (st == NULL) {
        return NULL;
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || kwnames != NULL) {
        return PyObject_Vectorcall(st->slow_getitem, args, nargs, kwnames);
    }
    PyObject *q = args[0], *ctype = args[1];
    if (Py_TYPE(q) == st->query_type) {
        PyObject *cache = SLOT(q, st->q_cache);
        if (cache != NULL && PyDict_CheckExact(cache)) {
            Py_INCREF(cache);
            PyObject *cached = PyDict_GetItemWithError(cache, ctype);
            Py_XINCREF(cached);
            Py_DECREF(cache);
            if (cached != NULL) {
                return cached;
            }
            PyErr_Clear();  /* (unhashable: the Python method says what is wrong) */
        }
    }
    PyObject *arr = aligned_view(st, q, ctype, st->frozen_name, st->data_name);
    if (arr == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        goto slow;
    }
    PyObject *cache = SLOT(q, st->q_cache);  /* (read again: touching ran code) */
    if (cache == NULL || !PyDict_CheckExact(cache)) {
        return arr;
    }
    Py_INCREF(cache);
    int stored = PyDict_SetItem(cache, ctype, arr);
    Py_DECREF(cache);
    if (stored < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
slow:
    return PyObject_Vectorcall(st->slow_getitem, args, nargs, NULL);
}

/* Query.unstructured: an aligned plan's column as a (rows, values per row) view of the
 * store's flat array (a writable one counts as a write to its rows, as in Python). */
static PyObject *
flat_column(PyObject *module, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *st = columns_state(module);
    if (st == NULL) {
        return NULL;
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || kwnames != NULL) {
        return PyObject_Vectorcall(st->slow_unstructured, args, nargs, kwnames);
    }
    PyObject *flat = aligned_view(st, args[0], args[1], st->frozen_flat_name, st->flat_name);
    if (flat != NULL || PyErr_Occurred()) {
        return flat;
    }
    /* (also fields of several dtypes, no flat array: the Python method explains) */
    return PyObject_Vectorcall(st->slow_unstructured, args, nargs, NULL);
}

/* A world's open-block count (`_open_queries`) into `count` when it is an exact int
 * that a step of `by` (+1 or -1) keeps within a C long: 0; else -1, no exception set
 * (the caller takes the Python path, which counts without bounds). */
static int
block_count(State *st, PyObject *world, int by, long *count)
{
    PyObject *open = SLOT(world, st->w_open);
    if (open == NULL || !PyLong_CheckExact(open)) {
        return -1;
    }
    long n = PyLong_AsLong(open);
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if ((by > 0 && n == LONG_MAX) || (by < 0 && n == LONG_MIN)) {
        return -1;
    }
    *count = n;
    return 0;
}

/* Set a world's open-block count; -1 with an exception when the int cannot be made. */
static int
set_block_count(State *st, PyObject *world, long count)
{
    PyObject *counted = PyLong_FromLong(count);
    if (counted == NULL) {
        return -1;
    }
    set_slot(world, st->w_open, counted);
    Py_DECREF(counted);
    return 0;
}

/* Whether a prefix plan's rows still hold though the layout clock moved (as
 * Query.__enter__ checks in Python): its rows are [0, size) of its first store's key
 * array, and that array and the size its lead store gives (all of it, or the prefix of
 * the group that owns it) are those it resolved with. 1: they hold; 0: the Python
 * method decides (no exception set). */
static int
prefix_holds(State *st, PyObject *plan)
{
    if (!st->columns_configured) {
        return 0;
    }
    PyObject *prefix = SLOT(plan, st->p_prefix), *lead = SLOT(plan, st->p_prefix_lead);
    PyObject *stores = SLOT(plan, st->p_stores), *keys = SLOT(plan, st->p_prefix_keys);
    PyObject *size = SLOT(plan, st->p_prefix_size);
    if (prefix == NULL || prefix == Py_None || lead == NULL || stores == NULL
            || keys == NULL || size == NULL || !PyLong_CheckExact(size)
            || !PyTuple_CheckExact(stores) || PyTuple_GET_SIZE(stores) == 0) {
        return 0;
    }
    PyObject *first = PyTuple_GET_ITEM(stores, 0);
    if (Py_TYPE(first) != st->store_type || Py_TYPE(lead) != st->store_type) {
        return 0;  /* (exact stores: reading their plain attributes runs no Python code) */
    }
    PyObject *entities = PyObject_GetAttr(first, st->entities_name);
    int same = entities == keys;
    Py_XDECREF(entities);
    PyObject *rows = NULL;
    if (same && prefix == lead) {
        rows = PyObject_GetAttr(lead, st->n_name);
    }
    else if (same) {
        PyObject *owner = PyObject_GetAttr(lead, st->owner_name);
        if (owner == prefix) {
            rows = PyObject_GetAttr(lead, st->group_size_name);
        }
        Py_XDECREF(owner);
    }
    int holds = rows != NULL && PyLong_CheckExact(rows)
        && PyObject_RichCompareBool(rows, size, Py_EQ) == 1;  /* (exact ints) */
    Py_XDECREF(rows);
    PyErr_Clear();
    return holds;
}

/* An exact int attribute of an exact store (a new reference), or NULL with no
 * exception. */
static PyObject *
int_attr(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value != NULL && !PyLong_CheckExact(value)) {
        Py_CLEAR(value);
    }
    PyErr_Clear();
    return value;
}

/* QueryPlan.resolve of a plan served by a prefix that moved (a spawn or despawn changed
 * its size, or its store's key array grew), as QueryPlan._resize and _remember do it in
 * Python: rows [0, size) of its first store, where size is now that store's row count
 * (the plan's prefix is the store), its group's size (the prefix is the group owning its
 * lead store), or the size of the group with more types whose prefix serves it while
 * one of its stores holds only that group's members (`_within`); the layouts and the
 * signature the next checks compare. 1: resolved; 0: the Python method decides (nothing
 * changed, no exception set); -1: an error. */
static int
prefix_resize(State *st, PyObject *plan, PyObject *now)
{
    PyObject *prefix = SLOT(plan, st->p_prefix), *stores = SLOT(plan, st->p_stores);
    PyObject *types = SLOT(plan, st->p_types), *without = SLOT(plan, st->p_without);
    PyObject *signature = SLOT(plan, st->p_signature), *within = SLOT(plan, st->p_within);
    int served = prefix != NULL && prefix != Py_None;  /* (else by `within`) */
    if (!served && (prefix == NULL || within == NULL || within == Py_None)) {
        return 0;
    }
    if (stores == NULL || !PyTuple_CheckExact(stores)
            || PyTuple_GET_SIZE(stores) == 0 || types == NULL || !PyTuple_CheckExact(types)
            || without == NULL || !PyTuple_CheckExact(without) || PyTuple_GET_SIZE(without)
            || signature == NULL || signature == Py_None) {
        return 0;  /* (excluded types: their layouts are part of the signature) */
    }
    PyObject *first = PyTuple_GET_ITEM(stores, 0);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(stores); i++) {
        if (Py_TYPE(PyTuple_GET_ITEM(stores, i)) != st->store_type) {
            return 0;  /* (exact stores: reading their plain attributes runs no Python) */
        }
    }
    int result = 0;
    PyObject *lead = NULL, *size = NULL, *keys = NULL, *view = NULL, *rows = NULL;
    PyObject *slice = NULL, *layouts = NULL, *sig = NULL, *owner = NULL;
    PyObject *group = served ? prefix : within;
    if (group == first) {
        lead = Py_NewRef(first);
        size = int_attr(first, st->n_name);
    }
    else {
        PyObject *group_stores = PyObject_GetAttr(group, st->stores_name);
        if (group_stores != NULL && PyTuple_CheckExact(group_stores)
                && PyTuple_GET_SIZE(group_stores) > 0
                && Py_TYPE(PyTuple_GET_ITEM(group_stores, 0)) == st->store_type) {
            lead = Py_NewRef(PyTuple_GET_ITEM(group_stores, 0));
        }
        Py_XDECREF(group_stores);
        PyErr_Clear();
        owner = lead == NULL ? NULL : PyObject_GetAttr(lead, st->owner_name);
        PyErr_Clear();
        if (owner == group) {  /* (a disbanded or replaced group: Python resolves) */
            size = int_attr(lead, st->group_size_name);
        }
    }
    if (size == NULL) {
        goto done;
    }
    if (!served) {  /* (a store of the plan must hold only the group's members) */
        int only_members = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(stores) && !only_members; i++) {
            PyObject *n = int_attr(PyTuple_GET_ITEM(stores, i), st->n_name);
            only_members = n != NULL && PyObject_RichCompareBool(n, size, Py_EQ) == 1;
            Py_XDECREF(n);
        }
        PyErr_Clear();
        if (!only_members) {
            goto done;
        }
    }
    Py_ssize_t rows_n = PyLong_AsSsize_t(size);
    keys = PyObject_GetAttr(first, st->entities_name);
    if (rows_n < 0 || keys == NULL || Py_TYPE(keys) != st->array_type
            || PyArray_NDIM((PyArrayObject *)keys) != 1
            || rows_n > PyArray_DIM((PyArrayObject *)keys, 0)) {
        PyErr_Clear();
        goto done;
    }
    /* From here on only new objects are made: any failure is a MemoryError. */
    result = -1;
    PyObject *zero = PyLong_FromLong(0);
    slice = zero == NULL ? NULL : PySlice_New(zero, size, NULL);
    Py_XDECREF(zero);
    view = slice == NULL ? NULL : PyObject_GetItem(keys, slice);
    if (view == NULL || Py_TYPE(view) != st->array_type) {
        goto done;
    }
    PyArray_CLEARFLAGS((PyArrayObject *)view, NPY_ARRAY_WRITEABLE);  /* (its own view) */
    rows = PyDict_New();
    for (Py_ssize_t i = 0; rows != NULL && i < PyTuple_GET_SIZE(types); i++) {
        if (PyDict_SetItem(rows, PyTuple_GET_ITEM(types, i), slice) < 0) {
            goto done;
        }
    }
    Py_ssize_t nstores = PyTuple_GET_SIZE(stores);
    layouts = PyTuple_New(nstores);
    if (rows == NULL || layouts == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nstores; i++) {  /* _OWNED_LAYOUT of each store */
        PyObject *store = PyTuple_GET_ITEM(stores, i);
        PyObject *layout = PyTuple_New(3);
        if (layout == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(layouts, i, layout);
        PyObject *names[3] = {st->layout_version_name, st->group_size_name, st->owner_name};
        for (int k = 0; k < 3; k++) {
            PyObject *value = PyObject_GetAttr(store, names[k]);
            if (value == NULL) {
                goto done;
            }
            PyTuple_SET_ITEM(layout, k, value);
        }
    }
    PyObject *first_layout = PyTuple_GET_ITEM(layouts, 0);
    sig = PyTuple_Pack(5, PyTuple_GET_ITEM(first_layout, 1), PyTuple_GET_ITEM(first_layout, 2),
                       keys, st->empty, PyTuple_GET_ITEM(first_layout, 0));
    if (sig == NULL) {
        goto done;
    }
    set_slot(plan, st->p_rows, rows);
    set_slot(plan, st->p_entities, view);
    set_slot(plan, st->p_aligned, Py_True);
    if (served) {  /* (what the next blocks' prefix check compares) */
        set_slot(plan, st->p_prefix_keys, keys);
        set_slot(plan, st->p_prefix_lead, lead);
        set_slot(plan, st->p_prefix_size, size);
    }
    set_slot(plan, st->p_layouts, layouts);
    set_slot(plan, st->p_stamp, now);
    set_slot(plan, st->p_settled, Py_False);  /* (aligned: see QueryPlan._is_settled) */
    set_slot(plan, st->p_signature, sig);
    result = 1;
done:
    Py_XDECREF(lead);
    Py_XDECREF(owner);
    Py_XDECREF(size);
    Py_XDECREF(keys);
    Py_XDECREF(view);
    Py_XDECREF(rows);
    Py_XDECREF(slice);
    Py_XDECREF(layouts);
    Py_XDECREF(sig);
    return result;
}

/* Query.__enter__: a block of a plan whose rows stand (no store moved rows since it
 * resolved, and it is aligned or settled; or a prefix plan whose prefix holds) only
 * takes the plan's keys and counts itself open. */
static PyObject *
enter(PyObject *module, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *st = configured_state(module);
    if (st == NULL) {
        return NULL;
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL) {
        return PyObject_Vectorcall(st->slow_enter, args, nargs, kwnames);
    }
    PyObject *q = args[0];
    if (Py_TYPE(q) != st->query_type || SLOT(q, st->q_in) != Py_None) {
        goto slow;  /* (a block of this object is open already: counted in Python) */
    }
    PyObject *ref = SLOT(q, st->q_world), *plan = SLOT(q, st->q_plan);
    if (ref == NULL || !PyWeakref_CheckRef(ref) || plan == NULL
            || Py_TYPE(plan) != st->plan_type) {
        goto slow;
    }
    PyObject *world = PyWeakref_GET_OBJECT(ref);
    if (world == Py_None || !PyObject_TypeCheck(world, st->state_type)) {
        goto slow;  /* (a world that is gone: the Python method says so) */
    }
    PyObject *clock = SLOT(plan, st->p_clock);
    if (clock == NULL || Py_TYPE(clock) != st->clock_type) {
        goto slow;
    }
    PyObject *stamp = SLOT(plan, st->p_stamp), *now = SLOT(clock, st->c_stamp);
    if (stamp == NULL || now == NULL) {
        goto slow;
    }
    int current = stamp == now;
    if (!current && PyLong_CheckExact(stamp) && PyLong_CheckExact(now)) {
        current = PyObject_RichCompareBool(stamp, now, Py_EQ) == 1;  /* (exact ints) */
    }
    if (current) {
        if (SLOT(plan, st->p_aligned) != Py_True && SLOT(plan, st->p_settled) != Py_True) {
            goto slow;
        }
    }
    else if (!PyLong_CheckExact(now)) {
        goto slow;
    }
    else if (!prefix_holds(st, plan)) {
        int resized = st->columns_configured ? prefix_resize(st, plan, now) : 0;
        if (resized < 0) {
            return NULL;
        }
        if (resized == 0) {
            goto slow;
        }
        current = 1;  /* (its stamp is the clock's now) */
    }
    PyObject *entities = SLOT(plan, st->p_entities);
    long count;
    if (entities == NULL || block_count(st, world, +1, &count) < 0) {
        goto slow;
    }
    if (set_block_count(st, world, count + 1) < 0) {
        return NULL;
    }
    if (!current) {  /* (checked now: the next blocks take the clock's comparison) */
        set_slot(plan, st->p_stamp, now);
    }
    set_slot(q, st->q_in, world);
    set_slot(q, st->q_entities, entities);
    Py_INCREF(q);
    return q;
slow:
    return PyObject_CallOneArg(st->slow_enter, q);
}

/* Make every column the block handed out read-only (arr.setflags(write=False)); the
 * columns were views of the stores, none gathered. An exact ndarray has its WRITEABLE
 * flag cleared with no call (setflags also clears numpy's private warn-on-write flag,
 * which views of the stores' own arrays never carry); anything else gets the call. 0,
 * or -1 with an exception set. */
static int
freeze(State *st, PyObject *writable)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(writable); i++) {
        PyObject *arr = PyList_GET_ITEM(writable, i);
        if (st->array_type != NULL && Py_TYPE(arr) == st->array_type) {
            PyArray_CLEARFLAGS((PyArrayObject *)arr, NPY_ARRAY_WRITEABLE);
            continue;
        }
        PyObject *call[2] = {arr, Py_False};
        PyObject *done = PyObject_VectorcallMethod(st->setflags_name, call, 1, st->write_kw);
        if (done == NULL) {
            return -1;
        }
        Py_DECREF(done);
    }
    return 0;
}

/* Query.__exit__: a block that raised nothing, gathered no column and is not nested in
 * a block of the same object makes its columns read-only and closes; the last open
 * block runs the deferred changes (as Query.__exit__ and _release_columns do). */
static PyObject *
exit_block(PyObject *module, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *st = configured_state(module);
    if (st == NULL) {
        return NULL;
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 4 || kwnames != NULL) {
        return PyObject_Vectorcall(st->slow_exit, args, nargs, kwnames);
    }
    PyObject *q = args[0];
    if (Py_TYPE(q) != st->query_type || args[2] != Py_None
            || SLOT(q, st->q_depth) != st->zero || SLOT(q, st->q_gathered) != Py_None) {
        goto slow;
    }
    PyObject *writable = SLOT(q, st->q_writable), *cache = SLOT(q, st->q_cache);
    if (writable == NULL || !PyList_CheckExact(writable) || cache == NULL
            || !PyDict_CheckExact(cache)) {
        goto slow;
    }
    PyObject *world = SLOT(q, st->q_in);
    if (world == NULL || world == Py_None || !PyObject_TypeCheck(world, st->state_type)) {
        goto slow;
    }
    PyObject *deferred = SLOT(world, st->w_deferred);
    long count;
    if (deferred == NULL || !PyList_CheckExact(deferred)
            || block_count(st, world, -1, &count) < 0) {
        goto slow;  /* (checked before anything changes: the slow path does it all) */
    }
    int failed = 0;
    if (PyList_GET_SIZE(writable)) {
        Py_INCREF(writable);
        failed = freeze(st, writable) < 0;
        Py_DECREF(writable);
        PyObject *fresh = PyList_New(0);  /* (also after a failure, as in Python) */
        if (fresh == NULL) {
            return NULL;
        }
        set_slot(q, st->q_writable, fresh);
        Py_DECREF(fresh);
    }
    if (PyDict_GET_SIZE(cache)) {
        PyObject *fresh = PyDict_New();
        if (fresh == NULL) {
            return NULL;
        }
        set_slot(q, st->q_cache, fresh);
        Py_DECREF(fresh);
    }
    /* The block closes whatever happened above (Python's `finally`). */
    PyObject *error_type = NULL, *error = NULL, *trace = NULL;
    if (failed) {
        PyErr_Fetch(&error_type, &error, &trace);
    }
    if (set_block_count(st, world, count - 1) < 0) {
        Py_XDECREF(error_type);
        Py_XDECREF(error);
        Py_XDECREF(trace);
        return NULL;
    }
    Py_INCREF(world);  /* (the block's reference goes now; the flush needs the world) */
    set_slot(q, st->q_in, Py_None);
    if (count - 1 == 0) {
        deferred = SLOT(world, st->w_deferred);  /* (the freeze may have run Python code) */
        if (deferred != NULL && PyList_CheckExact(deferred) && PyList_GET_SIZE(deferred)) {
            PyObject *done = PyObject_CallMethodNoArgs(world, st->flush_name);
            if (done == NULL) {
                if (failed) {  /* (the flush's error, with the first one as its context) */
                    PyObject *type2, *error2, *trace2;
                    PyErr_Fetch(&type2, &error2, &trace2);
                    PyErr_NormalizeException(&type2, &error2, &trace2);
                    PyErr_NormalizeException(&error_type, &error, &trace);
                    if (error2 != NULL && error != NULL) {
                        PyException_SetContext(error2, error);  /* (steals error) */
                        error = NULL;
                    }
                    Py_XDECREF(error_type);
                    Py_XDECREF(error);
                    Py_XDECREF(trace);
                    PyErr_Restore(type2, error2, trace2);
                }
                Py_DECREF(world);
                return NULL;
            }
            Py_DECREF(done);
        }
    }
    Py_DECREF(world);
    if (failed) {
        PyErr_Restore(error_type, error, trace);
        return NULL;
    }
    Py_RETURN_NONE;
slow:
    return PyObject_Vectorcall(st->slow_exit, args, nargs, NULL);
}

/* World.query: the plan of this call shape hands out its last query again when nothing
 * else holds it (no block open, no caller kept it). */
static PyObject *
query(PyObject *module, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *st = configured_state(module);
    if (st == NULL) {
        return NULL;
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2) {
        goto slow;
    }
    /* without= and readonly= (by keyword only), () when not given */
    PyObject *without = st->empty, *readonly = st->empty;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (name == st->without_name) {
            without = args[nargs + i];
        }
        else if (name == st->readonly_name) {
            readonly = args[nargs + i];
        }
        else {
            goto slow;  /* (another spelling or a wrong name: Python says what is wrong) */
        }
    }
    PyObject *world = args[0];
    PyObject *plans = PyObject_TypeCheck(world, st->state_type)
        ? SLOT(world, st->w_plans) : NULL;
    if (plans == NULL || !PyDict_CheckExact(plans)) {
        goto slow;
    }
    PyObject *types = PyTuple_New(nargs - 1);  /* the types as given */
    if (types == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 1; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(types, i - 1, args[i]);
    }
    /* The key World.query uses: the types alone, or (types, without, readonly) */
    PyObject *key = types;
    int some = PyObject_IsTrue(without);
    if (some == 0) {
        some = PyObject_IsTrue(readonly);
    }
    if (some < 0) {
        PyErr_Clear();
        Py_DECREF(types);
        goto slow;
    }
    if (some) {
        key = PyTuple_Pack(3, types, without, readonly);
        Py_DECREF(types);
        if (key == NULL) {
            return NULL;
        }
    }
    Py_INCREF(plans);  /* (hashing the key may run Python code that drops the dict) */
    PyObject *plan = PyDict_GetItemWithError(plans, key);
    Py_XINCREF(plan);
    Py_DECREF(plans);
    Py_DECREF(key);
    if (plan == NULL) {
        PyErr_Clear();  /* (unhashable arguments: the Python method says what is wrong) */
        goto slow;
    }
    PyObject *idle = Py_TYPE(plan) == st->plan_type ? SLOT(plan, st->p_idle) : NULL;
    if (idle == NULL || Py_TYPE(idle) != st->query_type || SLOT(idle, st->q_in) != Py_None
            || Py_REFCNT(idle) != 1) {  /* (1: the plan's slot, nothing else) */
        Py_DECREF(plan);
        goto slow;
    }
    set_slot(idle, st->q_entities, st->no_keys);
    Py_INCREF(idle);
    Py_DECREF(plan);
    return idle;
slow:
    return PyObject_Vectorcall(st->slow_query, args, nargsf, kwnames);
}

static PyMethodDef queryblock_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL, configure_doc},
    {"configure_columns", (PyCFunction)(void (*)(void))configure_columns, METH_FASTCALL,
     configure_columns_doc},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef fast_enter = {"__enter__", (PyCFunction)(void (*)(void))enter,
                                 METH_FASTCALL | METH_KEYWORDS,
                                 "__enter__($self, /)\n--\n\nOpen the block (see Query)."};
static PyMethodDef fast_exit = {"__exit__", (PyCFunction)(void (*)(void))exit_block,
                                METH_FASTCALL | METH_KEYWORDS,
                                "__exit__($self, exc_type, exc, tb)\n--\n\n"
                                "Close the block (see Query)."};
static PyMethodDef fast_column = {"__getitem__", (PyCFunction)(void (*)(void))column,
                                  METH_FASTCALL | METH_KEYWORDS,
                                  "__getitem__($self, ctype, /)\n--\n\n"
                                  "The block's column of ctype (see Query)."};
static PyMethodDef fast_flat = {"unstructured", (PyCFunction)(void (*)(void))flat_column,
                                METH_FASTCALL | METH_KEYWORDS,
                                "unstructured($self, ctype, /)\n--\n\n"
                                "q[ctype] as a plain (rows, values per row) array sharing "
                                "its memory (see Query.unstructured)."};
static PyMethodDef fast_query = {"query", (PyCFunction)(void (*)(void))query,
                                 METH_FASTCALL | METH_KEYWORDS,
                                 "query($self, /, *types, without=(), readonly=())\n--\n\n"
                                 "Entities with all types (and none of without): "
                                 "`with world.query(...) as q`.\n\nThe arguments are "
                                 "checked once per distinct call shape; the resolved rows "
                                 "are reused until a structural change moves rows of a "
                                 "store involved."};

/* The fast paths as methods for the classes (instancemethod binds `self`). */
static int
add_method(PyObject *module, PyMethodDef *def, const char *as)
{
    PyObject *function = PyCFunction_New(def, module);
    if (function == NULL) {
        return -1;
    }
    PyObject *method = PyInstanceMethod_New(function);
    Py_DECREF(function);
    if (method == NULL) {
        return -1;
    }
    int added = PyModule_AddObjectRef(module, as, method);
    Py_DECREF(method);
    return added;
}

static int
queryblock_exec(PyObject *module)
{
    if (add_method(module, &fast_enter, "enter") < 0
            || add_method(module, &fast_exit, "exit") < 0
            || add_method(module, &fast_query, "query") < 0
            || add_method(module, &fast_column, "column") < 0
            || add_method(module, &fast_flat, "flat_column") < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot queryblock_slots[] = {
    {Py_mod_exec, queryblock_exec},
    {0, NULL},
};

static struct PyModuleDef queryblock_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ecs_engine._queryblock",
    .m_doc = "Query blocks opened and closed without a Python frame (see queryblock.py).",
    .m_size = sizeof(State),
    .m_methods = queryblock_methods,
    .m_slots = queryblock_slots,
    .m_traverse = state_traverse,
    .m_clear = state_clear,
    .m_free = state_free,
};

PyMODINIT_FUNC
PyInit__queryblock(void)
{
    return PyModuleDef_Init(&queryblock_module);
}
