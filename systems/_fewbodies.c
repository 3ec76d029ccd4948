/* A few bodies against the level's static boxes, one body at a time in C
 * (systems/collision_few.py: move_bodies; systems/overlaps_few.py: overlap_boxes).
 *
 * Below a few dozen bodies the vectorised collision pays numpy's fixed cost per call
 * (about a microsecond, over a hundred calls a tick), and the Python loops that take
 * over there pay Python's cost per body (about 2.5 us a body). These loops repeat the
 * Python loops step for step: the same float64 arithmetic in the same order (built
 * without fusing a*b+c into one rounding), the same table reads, the same rows in the
 * same order, so all three give the same bytes (tests/test_fewbodies.py). Anything
 * they do not cover (arrays of another kind, a non-finite value, a body near an
 * unaligned box) returns None before anything is written: the Python loop then takes
 * the call, and declines what it declines. So does every call where doubles are not
 * evaluated as doubles (FLT_EVAL_METHOD != 0: x87 code keeps extra precision between
 * steps, which the Python loops do not).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

/* Rows one call takes at the most (the callers stop far below: FEW_BODIES, FEW_BOXES). */
#define MAX_ROWS (1 << 24)
#define MAX_COORD (1LL << 30)  /* TileGrid.build keeps coordinates and sizes below this */
/* (after <float.h>, which defines FLT_EVAL_METHOD) */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#define EXACT_DOUBLES 0
#else
#define EXACT_DOUBLES 1
#endif

typedef struct {
    PyObject *x, *y, *w, *h;  /* the field names the stock components use */
} State;

static State *
state_of(PyObject *module)
{
    return (State *)PyModule_GetState(module);
}

/* One axis of TileGrid's face tables (tilegrid._AxisTables). */
typedef struct {
    const float *starts, *ends;
    Py_ssize_t size;
    long long stride, origin, across, rows;
} Axis;

/* A 1-d, aligned, native-order, C-contiguous array of `type_num` (writable if asked). */
static int
plain_array(PyObject *obj, int type_num, int writable)
{
    if (!PyArray_Check(obj)) {
        return 0;
    }
    PyArrayObject *arr = (PyArrayObject *)obj;
    int wanted = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED
                 | (writable ? NPY_ARRAY_WRITEABLE : 0);
    return PyArray_NDIM(arr) == 1 && (PyArray_FLAGS(arr) & wanted) == wanted
           && PyArray_TYPE(arr) == type_num && PyArray_ISNOTSWAPPED(arr);
}

/* An exact int into `out`: 1; 0 when it is not one (no exception). */
static int
exact_int(PyObject *obj, long long *out)
{
    if (!PyLong_CheckExact(obj)) {
        return 0;
    }
    *out = PyLong_AsLongLong(obj);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* (starts, ends, stride, origin, across, rows) as an Axis: 1; 0 when it is not one
 * whose every read below stays inside the tables. */
static int
take_axis(PyObject *args, Axis *t)
{
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != 6) {
        return 0;
    }
    PyObject *starts = PyTuple_GET_ITEM(args, 0), *ends = PyTuple_GET_ITEM(args, 1);
    if (!plain_array(starts, NPY_FLOAT32, 0) || !plain_array(ends, NPY_FLOAT32, 0)
            || !exact_int(PyTuple_GET_ITEM(args, 2), &t->stride)
            || !exact_int(PyTuple_GET_ITEM(args, 3), &t->origin)
            || !exact_int(PyTuple_GET_ITEM(args, 4), &t->across)
            || !exact_int(PyTuple_GET_ITEM(args, 5), &t->rows)) {
        return 0;
    }
    t->size = PyArray_DIM((PyArrayObject *)starts, 0);
    /* (the layout _pair_rows makes: 2 * rows + 3 table rows; TileGrid.build keeps
     * coordinates within 2**30, so no index below overflows) */
    if (t->stride < 2 || t->rows < 0 || t->rows > MAX_COORD || t->stride > MAX_COORD
            || t->origin < -MAX_COORD || t->origin > MAX_COORD
            || t->across < -MAX_COORD || t->across > MAX_COORD
            || PyArray_DIM((PyArrayObject *)ends, 0) != t->size
            || t->size != (2 * t->rows + 3) * t->stride) {
        return 0;
    }
    t->starts = (const float *)PyArray_DATA((PyArrayObject *)starts);
    t->ends = (const float *)PyArray_DATA((PyArrayObject *)ends);
    return 1;
}

/* Two float32 fields of 1-d structured rows. */
typedef struct {
    char *rows;
    Py_ssize_t stride, n, a, b;  /* row step, rows, byte offsets of the two fields */
} Fields;

/* The byte offset of field `name` if it is a native float32 field of `descr`: 1; 0 when
 * it is not. Only dtypes whose field names are all exact strings: looking up a name
 * then runs no Python code (a str subclass's __eq__ could free the arrays held). */
static int
float32_field(PyArray_Descr *descr, PyObject *name, Py_ssize_t *offset)
{
    PyObject *fields = PyDataType_FIELDS(descr), *names = PyDataType_NAMES(descr);
    if (fields == NULL || !PyDict_CheckExact(fields) || names == NULL
            || !PyTuple_Check(names)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i))) {
            return 0;
        }
    }
    PyObject *item = PyDict_GetItemWithError(fields, name);  /* (borrowed) */
    if (item == NULL || !PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2) {
        PyErr_Clear();
        return 0;
    }
    PyArray_Descr *type = (PyArray_Descr *)PyTuple_GET_ITEM(item, 0);
    if (!PyArray_DescrCheck(type) || type->type_num != NPY_FLOAT32
            || !PyArray_ISNBO(type->byteorder)) {
        return 0;
    }
    *offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1));
    if (*offset == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return *offset >= 0 && *offset + 4 <= PyDataType_ELSIZE(descr);
}

/* Fields `a` and `b` of the 1-d structured array `obj`: 1; 0 when it is not one (or
 * not writable when asked). */
static int
take_fields(PyObject *obj, PyObject *a, PyObject *b, int writable, Fields *out)
{
    if (!PyArray_CheckExact(obj)) {  /* (a subclass may mean more: a mask, say) */
        return 0;
    }
    PyArrayObject *arr = (PyArrayObject *)obj;
    if (PyArray_NDIM(arr) != 1 || (writable && !PyArray_ISWRITEABLE(arr))
            || !float32_field(PyArray_DESCR(arr), a, &out->a)
            || !float32_field(PyArray_DESCR(arr), b, &out->b)) {
        return 0;
    }
    out->rows = PyArray_BYTES(arr);
    out->stride = PyArray_STRIDE(arr, 0);
    out->n = PyArray_DIM(arr, 0);
    return 1;
}

static double
read_f32(const Fields *f, Py_ssize_t row, Py_ssize_t offset)
{
    float v;
    memcpy(&v, f->rows + row * f->stride + offset, sizeof v);
    return (double)v;
}

static void
write_f32(const Fields *f, Py_ssize_t row, Py_ssize_t offset, double value)
{
    float v = (float)value;
    memcpy(f->rows + row * f->stride + offset, &v, sizeof v);
}

/* `v` (a whole number, or +-inf) clamped to [lo, hi], as an integer (a nan, which the
 * finite check keeps out, would give `lo`: never an out-of-range cast). */
static long long
clamp_whole(double v, long long lo, long long hi)
{
    return !(v >= (double)lo) ? lo : v > (double)hi ? hi : (long long)v;
}

/* collision_few._rows_one_by_one: the faces for a box over no grid row or more than
 * two, read row by row. */
static void
rows_one_by_one(const Axis *t, double centre, long long first, long long span,
                double *face_fwd, double *face_back)
{
    long long end = t->origin + t->stride - 1;
    long long col_fwd = clamp_whole(ceil(centre), t->origin, end) - t->origin;
    long long col_back = clamp_whole(floor(centre), t->origin - 1, end - 1) - t->origin + 1;
    long long start = first - (t->across - 1);
    double best_fwd = INFINITY, best_back = -INFINITY;
    for (long long j = 0; j <= span; j++) {
        long long row = 2 * (start + j) * t->stride;
        double v = t->starts[row + col_fwd];
        if (v < best_fwd) {  /* (min(best, v) keeps best unless v is smaller) */
            best_fwd = v;
        }
        v = t->ends[row + col_back];
        if (v > best_back) {
            best_back = v;
        }
    }
    *face_fwd = best_fwd;
    *face_back = best_back;
}

/* collision_few._sweep: one axis pass; moves `centres` in place and lists the stopped
 * rows (forward ones first, then backward ones, each in row order) in `stopped`,
 * returning how many stopped forward (the rest of `*count` stopped backward). */
static Py_ssize_t
sweep(const Axis *t, double *centres, const double *halves, const double *moves,
      const double *other_lo, const double *other_hi, Py_ssize_t n, double skin,
      Py_ssize_t *stopped, Py_ssize_t *back, Py_ssize_t *count)
{
    long long row_lo = t->across - 1, row_hi = t->across + t->rows;
    long long col_lo = t->origin - 1, col_hi = t->origin + t->stride - 2;
    long long shift = -2 * (t->across - 1) * t->stride - t->origin + 1;
    Py_ssize_t n_fwd = 0, n_back = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double centre = centres[i], half = halves[i], move = moves[i];
        long long first = clamp_whole(floor(other_lo[i]), row_lo, row_hi);
        long long last = clamp_whole(ceil(other_hi[i]) - 1, row_lo, row_hi);
        long long col = clamp_whole(floor(centre), col_lo, col_hi);
        long long index = ((first + last) * t->stride + col + shift) % t->size;
        if (index < 0) {
            index += t->size;  /* (Python's % and take's mode="wrap") */
        }
        double face_fwd = t->starts[index], face_back = t->ends[index];
        long long span = last - first;
        if (span < 0 || span > 1) {
            rows_one_by_one(t, centre, first, span, &face_fwd, &face_back);
        }
        else if ((double)col == centre && col >= t->origin) {
            face_fwd = t->starts[index > 0 ? index - 1 : t->size - 1];
        }
        if (move > 0) {
            double hi = centre + half;
            if (face_fwd < hi + move) {
                double limit = face_fwd - hi - skin;
                if (move > limit) {
                    centres[i] = centre + limit;
                    stopped[n_fwd++] = i;
                    continue;
                }
            }
        }
        else if (move < 0) {
            double lo = centre - half;
            if (face_back > lo + move) {
                double limit = face_back - lo + skin;
                if (move < limit) {
                    centres[i] = centre + limit;
                    back[n_back++] = i;
                    continue;
                }
            }
        }
        centres[i] = centre + move;
    }
    memcpy(stopped + n_fwd, back, (size_t)n_back * sizeof *back);
    *count = n_fwd + n_back;
    return n_fwd;
}

/* collision_few._any_near: whether a body may reach an unaligned box this tick.
 * `bounds`: (left, bottom, right, top, narrow axis is y) around the unaligned boxes. */
static int
any_near(const double bounds[4], int narrow_y, Py_ssize_t n, const double *xs,
         const double *ys, const double *hws, const double *hhs, const double *mxs,
         const double *mys)
{
    const double *c = xs, *half = hws, *move = mxs, *c2 = ys, *half2 = hhs, *move2 = mys;
    double lo = bounds[0], hi = bounds[2], lo2 = bounds[1], hi2 = bounds[3];
    if (narrow_y) {
        c = ys, half = hhs, move = mys, c2 = xs, half2 = hws, move2 = mxs;
        lo = bounds[1], hi = bounds[3], lo2 = bounds[0], hi2 = bounds[2];
    }
    if (n == 0) {
        return 0;
    }
    double max_half = half[0], max_move = move[0], min_move = move[0];
    for (Py_ssize_t i = 1; i < n; i++) {  /* (Python's max and min: first of equals) */
        if (half[i] > max_half) {
            max_half = half[i];
        }
        if (move[i] > max_move) {
            max_move = move[i];
        }
        if (move[i] < min_move) {
            min_move = move[i];
        }
    }
    double reach = -min_move > max_move ? -min_move : max_move;
    double margin = 2 * max_half + reach + 0.01;
    lo = lo - margin;
    hi = hi + margin;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (lo < c[i] && c[i] < hi) {
            double margin2 = 2 * half2[i] + fabs(move2[i]) + 0.01;
            if (lo2 - margin2 < c2[i] && c2[i] < hi2 + margin2) {
                return 1;
            }
        }
    }
    return 0;
}

#define MAX_PARTS 8

/* A list of `count` Python ints from `values`, or NULL. */
static PyObject *
int_list(const Py_ssize_t *values, Py_ssize_t count)
{
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *v = PyLong_FromSsize_t(values[i]);
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

PyDoc_STRVAR(move_bodies_doc,
"move_bodies(x_axis, y_axis, rest, parts, dt, skin, /)\n\n"
"collision_few.move_few's loop: move the (Position, Velocity, Collider) rows of each\n"
"part through the tile tables of both axes (_AxisTables.c_args), writing Position and\n"
"zeroing blocked Velocity. rest: None, or (left, bottom, right, top, narrow axis is y)\n"
"around the unaligned boxes. Returns (wall rows, wall sides, floor rows, floor sides) as\n"
"lists, or None (nothing written) when the call is not one this loop covers.");

static PyObject *
move_bodies(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    State *st = state_of(module);
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "move_bodies takes 6 arguments, got %zd", nargs);
        return NULL;
    }
    Axis ax, ay;
    PyObject *rest = args[2];
    double bounds[4] = {0, 0, 0, 0};
    int narrow_y = 0, has_rest = rest != Py_None;
    /* float(dt), as the Python loop takes it (which also reports what float() refuses) */
    double dt = PyFloat_AsDouble(args[4]);
    double skin = dt == -1.0 && PyErr_Occurred() ? -1.0 : PyFloat_AsDouble(args[5]);
    if (skin == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!EXACT_DOUBLES || !take_axis(args[0], &ax) || !take_axis(args[1], &ay)
            || !PyList_CheckExact(args[3]) || PyList_GET_SIZE(args[3]) > MAX_PARTS) {
        Py_RETURN_NONE;
    }
    if (has_rest) {
        if (!PyTuple_CheckExact(rest) || PyTuple_GET_SIZE(rest) != 5) {
            Py_RETURN_NONE;
        }
        for (int i = 0; i < 4; i++) {
            if (!PyFloat_CheckExact(PyTuple_GET_ITEM(rest, i))) {
                Py_RETURN_NONE;
            }
            bounds[i] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(rest, i));
        }
        narrow_y = PyTuple_GET_ITEM(rest, 4) == Py_True;
    }
    /* The parts as a tuple: it holds every part (and so every array) for the call. */
    PyObject *parts = PySequence_Tuple(args[3]);
    if (parts == NULL) {
        return NULL;
    }
    Py_ssize_t n_parts = PyTuple_GET_SIZE(parts), n = 0;
    Fields pos[MAX_PARTS], vel[MAX_PARTS], col[MAX_PARTS];
    double *work = NULL;
    Py_ssize_t *rows = NULL;
    PyObject *result = NULL;
    for (Py_ssize_t p = 0; p < n_parts; p++) {
        PyObject *part = PyTuple_GET_ITEM(parts, p);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 3
                || !take_fields(PyTuple_GET_ITEM(part, 0), st->x, st->y, 1, &pos[p])
                || !take_fields(PyTuple_GET_ITEM(part, 1), st->x, st->y, 1, &vel[p])
                || !take_fields(PyTuple_GET_ITEM(part, 2), st->w, st->h, 0, &col[p])
                || vel[p].n != pos[p].n || col[p].n != pos[p].n
                || pos[p].n > MAX_ROWS - n) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        n += pos[p].n;
    }
    /* xs, ys, hws, hhs, mxs, mys, then the extent across each pass */
    work = PyMem_Malloc((size_t)(n ? n : 1) * 8 * sizeof(double));
    rows = PyMem_Malloc((size_t)(n ? n : 1) * 4 * sizeof(Py_ssize_t));
    if (work == NULL || rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double *xs = work, *ys = xs + n, *hws = ys + n, *hhs = hws + n, *mxs = hhs + n;
    double *mys = mxs + n, *across_lo = mys + n, *across_hi = across_lo + n;
    Py_ssize_t k = 0;
    for (Py_ssize_t p = 0; p < n_parts; p++) {
        for (Py_ssize_t r = 0; r < pos[p].n; r++, k++) {
            xs[k] = read_f32(&pos[p], r, pos[p].a);
            ys[k] = read_f32(&pos[p], r, pos[p].b);
            hws[k] = read_f32(&col[p], r, col[p].a) * 0.5;
            hhs[k] = read_f32(&col[p], r, col[p].b) * 0.5;
            mxs[k] = read_f32(&vel[p], r, vel[p].a) * dt;
            mys[k] = read_f32(&vel[p], r, vel[p].b) * dt;
        }
    }
    /* The Python loop's test: one sum of each list (left to right), then of the sums.
     * (From Python 3.12 sum() compensates its rounding: the two may then disagree on a
     * sum right at the edge of overflow, which only decides who moves the bodies.) */
    double sums[6] = {0, 0, 0, 0, 0, 0};
    const double *lists[6] = {xs, ys, hws, hhs, mxs, mys};
    for (int j = 0; j < 6; j++) {
        for (Py_ssize_t i = 0; i < n; i++) {
            sums[j] += lists[j][i];
        }
    }
    double total = sums[0] + sums[1] + sums[2] + sums[3] + sums[4] + sums[5];
    if (!isfinite(total)
            || (has_rest && any_near(bounds, narrow_y, n, xs, ys, hws, hhs, mxs, mys))) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* x pass: the box's own extent along x, its y extent across. */
    for (Py_ssize_t i = 0; i < n; i++) {
        across_lo[i] = ys[i] - hhs[i];
        across_hi[i] = ys[i] + hhs[i];
    }
    Py_ssize_t *wall = rows, *floor_rows = rows + n, *back = rows + 2 * n;
    Py_ssize_t n_wall, n_floor;
    Py_ssize_t wall_fwd = sweep(&ax, xs, hws, mxs, across_lo, across_hi, n, skin, wall, back,
                                &n_wall);
    /* y pass: across it, the moved x extent. */
    for (Py_ssize_t i = 0; i < n; i++) {
        across_lo[i] = xs[i] - hws[i];
        across_hi[i] = xs[i] + hws[i];
    }
    Py_ssize_t floor_fwd = sweep(&ay, ys, hhs, mys, across_lo, across_hi, n, skin, floor_rows,
                                 back, &n_floor);
    Py_ssize_t start = 0;
    for (Py_ssize_t p = 0; p < n_parts; p++) {
        Py_ssize_t stop = start + pos[p].n;
        for (Py_ssize_t r = 0; r < pos[p].n; r++) {
            write_f32(&pos[p], r, pos[p].a, xs[start + r]);
            write_f32(&pos[p], r, pos[p].b, ys[start + r]);
        }
        for (Py_ssize_t i = 0; i < n_wall; i++) {
            if (start <= wall[i] && wall[i] < stop) {
                write_f32(&vel[p], wall[i] - start, vel[p].a, 0.0);
            }
        }
        for (Py_ssize_t i = 0; i < n_floor; i++) {
            if (start <= floor_rows[i] && floor_rows[i] < stop) {
                write_f32(&vel[p], floor_rows[i] - start, vel[p].b, 0.0);
            }
        }
        start = stop;
    }
    /* sides: +1 for the forward stops (listed first), -1 for the backward ones */
    Py_ssize_t *sides = rows + 3 * n;
    PyObject *out[4] = {NULL, NULL, NULL, NULL};
    out[0] = int_list(wall, n_wall);
    for (Py_ssize_t i = 0; i < n_wall; i++) {
        sides[i] = i < wall_fwd ? 1 : -1;
    }
    out[1] = out[0] == NULL ? NULL : int_list(sides, n_wall);
    out[2] = out[1] == NULL ? NULL : int_list(floor_rows, n_floor);
    for (Py_ssize_t i = 0; i < n_floor; i++) {
        sides[i] = i < floor_fwd ? 1 : -1;
    }
    out[3] = out[2] == NULL ? NULL : int_list(sides, n_floor);
    if (out[3] != NULL) {
        result = PyTuple_Pack(4, out[0], out[1], out[2], out[3]);
    }
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(out[i]);
    }
done:
    PyMem_Free(work);
    PyMem_Free(rows);
    Py_DECREF(parts);
    return result;
}

/* A 1-d float32 or float64 array's item `i` as a double. */
static double
read_real(PyArrayObject *arr, Py_ssize_t i)
{
    const char *at = PyArray_BYTES(arr) + i * PyArray_STRIDE(arr, 0);
    if (PyArray_TYPE(arr) == NPY_FLOAT64) {
        double v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    float v;
    memcpy(&v, at, sizeof v);
    return (double)v;
}

static int
real_array(PyObject *obj)
{
    return PyArray_CheckExact(obj) && PyArray_NDIM((PyArrayObject *)obj) == 1
           && (PyArray_TYPE((PyArrayObject *)obj) == NPY_FLOAT64
               || PyArray_TYPE((PyArrayObject *)obj) == NPY_FLOAT32)
           && PyArray_ISNOTSWAPPED((PyArrayObject *)obj);
}

PyDoc_STRVAR(overlap_boxes_doc,
"overlap_boxes(tiles, rest, left, bottom, right, top, out, few_boxes, few_pairs, /)\n\n"
"overlaps_few's loop: out[i] = whether box i (open) overlaps a static box. tiles: None,\n"
"or TileGrid.c_args (the flat summed-area table, origin x, origin y, width, height);\n"
"rest: the unaligned boxes' (left, bottom, right, top) one after another, as a flat\n"
"float64 array (LevelColliders.c_rest_boxes). True when done;\n"
"None (nothing written) when the call is not one this loop covers.");

static PyObject *
overlap_boxes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "overlap_boxes takes 9 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *tiles = args[0], *rest = args[1], *out_obj = args[6];
    long long few_boxes, few_pairs;
    if (!EXACT_DOUBLES || !exact_int(args[7], &few_boxes) || !exact_int(args[8], &few_pairs)) {
        Py_RETURN_NONE;
    }
    PyArrayObject *edge[4];
    Py_ssize_t n = -1;
    for (int j = 0; j < 4; j++) {
        if (!real_array(args[2 + j])) {
            Py_RETURN_NONE;
        }
        edge[j] = (PyArrayObject *)args[2 + j];
        if (n >= 0 && PyArray_DIM(edge[j], 0) != n) {
            Py_RETURN_NONE;
        }
        n = PyArray_DIM(edge[j], 0);
    }
    if (n > few_boxes || n > MAX_ROWS || !plain_array(out_obj, NPY_BOOL, 1)
            || PyArray_DIM((PyArrayObject *)out_obj, 0) != n
            || !plain_array(rest, NPY_FLOAT64, 0)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n_rest = PyArray_DIM((PyArrayObject *)rest, 0) / 4;
    if (PyArray_DIM((PyArrayObject *)rest, 0) != 4 * n_rest || n * n_rest > few_pairs) {
        Py_RETURN_NONE;
    }
    const int32_t *table = NULL;
    long long ox = 0, oy = 0, width = 0, height = 0;
    if (tiles != Py_None) {
        if (!PyTuple_CheckExact(tiles) || PyTuple_GET_SIZE(tiles) != 5
                || !plain_array(PyTuple_GET_ITEM(tiles, 0), NPY_INT32, 0)
                || !exact_int(PyTuple_GET_ITEM(tiles, 1), &ox)
                || !exact_int(PyTuple_GET_ITEM(tiles, 2), &oy)
                || !exact_int(PyTuple_GET_ITEM(tiles, 3), &width)
                || !exact_int(PyTuple_GET_ITEM(tiles, 4), &height)
                || width < 1 || height < 1 || width > MAX_COORD || height > MAX_COORD
                || ox < -MAX_COORD || ox > MAX_COORD || oy < -MAX_COORD || oy > MAX_COORD
                || PyArray_DIM((PyArrayObject *)PyTuple_GET_ITEM(tiles, 0), 0)
                   != (width + 1) * (height + 1)) {
            Py_RETURN_NONE;
        }
        table = (const int32_t *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(tiles, 0));
    }
    /* The Python loop's test: one sum of each edge list, then of the sums. */
    double sums[4] = {0, 0, 0, 0};
    for (int j = 0; j < 4; j++) {
        for (Py_ssize_t i = 0; i < n; i++) {
            sums[j] += read_real(edge[j], i);
        }
    }
    if (!isfinite(sums[0] + sums[1] + sums[2] + sums[3])) {
        Py_RETURN_NONE;
    }
    const double *boxes = (const double *)PyArray_DATA((PyArrayObject *)rest);
    npy_bool *hits = (npy_bool *)PyArray_DATA((PyArrayObject *)out_obj);
    long long stride = width + 1, last_x = width - 1, last_y = height - 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        double le = read_real(edge[0], i), bo = read_real(edge[1], i);
        double ri = read_real(edge[2], i), to = read_real(edge[3], i);
        npy_bool hit = 0;
        for (Py_ssize_t b = 0; b < n_rest && !hit; b++) {
            const double *box = boxes + 4 * b;
            hit = le < box[2] && ri > box[0] && bo < box[3] && to > box[1];
        }
        if (!hit && table != NULL) {
            /* TileGrid.overlaps: cells [c0, c1] x [r0, r1], clipped to the grid (in
             * float64 until clipped: an edge may be far outside any int) */
            double c0 = floor(le) - (double)ox, r0 = floor(bo) - (double)oy;
            double c1 = ceil(ri) - (double)(ox + 1), r1 = ceil(to) - (double)(oy + 1);
            c0 = c0 < 0 ? 0 : c0;
            r0 = r0 < 0 ? 0 : r0;
            c1 = c1 > (double)last_x ? (double)last_x : c1;
            r1 = r1 > (double)last_y ? (double)last_y : r1;
            if (!(c1 < c0 || r1 < r0)) {
                long long a0 = (long long)c0, b0 = (long long)r0;
                long long a1 = (long long)c1 + 1, b1 = (long long)r1 + 1;
                long long count = (long long)table[b1 * stride + a1]
                                  - table[b0 * stride + a1] - table[b1 * stride + a0]
                                  + table[b0 * stride + a0];
                hit = count > 0;
            }
        }
        hits[i] = hit;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef fewbodies_methods[] = {
    {"move_bodies", (PyCFunction)(void (*)(void))move_bodies, METH_FASTCALL,
     move_bodies_doc},
    {"overlap_boxes", (PyCFunction)(void (*)(void))overlap_boxes, METH_FASTCALL,
     overlap_boxes_doc},
    {NULL, NULL, 0, NULL},
};

static int
fewbodies_exec(PyObject *module)
{
    if (PyArray_ImportNumPyAPI() < 0) {
        return -1;
    }
    State *st = state_of(module);
    st->x = PyUnicode_InternFromString("x");
    st->y = PyUnicode_InternFromString("y");
    st->w = PyUnicode_InternFromString("w");
    st->h = PyUnicode_InternFromString("h");
    return st->x && st->y && st->w && st->h ? 0 : -1;
}

static int
fewbodies_traverse(PyObject *module, visitproc visit, void *arg)
{
    (void)module;
    (void)visit;
    (void)arg;
    return 0;  /* (interned strings only: no cycles) */
}

static void
fewbodies_free(void *module)
{
    State *st = state_of((PyObject *)module);
    Py_CLEAR(st->x);
    Py_CLEAR(st->y);
    Py_CLEAR(st->w);
    Py_CLEAR(st->h);
}

static PyModuleDef_Slot fewbodies_slots[] = {
    {Py_mod_exec, fewbodies_exec},
    {0, NULL},
};

static struct PyModuleDef fewbodies_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ecs_engine.systems._fewbodies",
    .m_doc = "A few bodies against the level's static boxes, one at a time "
             "(see collision_few.py and overlaps_few.py).",
    .m_size = sizeof(State),
    .m_methods = fewbodies_methods,
    .m_slots = fewbodies_slots,
    .m_traverse = fewbodies_traverse,
    .m_free = fewbodies_free,
};

PyMODINIT_FUNC
PyInit__fewbodies(void)
{
    return PyModuleDef_Init(&fewbodies_module);
}
