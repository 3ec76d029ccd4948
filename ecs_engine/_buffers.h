/* Typed views of numpy arrays through the buffer protocol, shared by the C parts. */
#ifndef ECS_ENGINE_BUFFERS_H
#define ECS_ENGINE_BUFFERS_H

#include <Python.h>
#include <string.h>

/* Ask for the cache line at `addr` ahead of its use (`write`: 1 if it will be written).
 * Rows at random places (a despawn's holes, the index entries of the keys that move)
 * miss the cache one after another when the rest of a frame has evicted the arrays;
 * asked for a few iterations early, their misses overlap. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(addr, write) __builtin_prefetch((addr), (write), 1)
#else
#define PREFETCH(addr, write) ((void)(addr))
#endif
#define PREFETCH_AHEAD 8  /* iterations ahead: enough misses in flight, few wasted */

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

/* A 1-d C-contiguous buffer of native `itemsize`-byte items of a struct code in `codes`
 * (e.g. "LQ": unsigned 64-bit integers, named `kind` in errors); 0, or -1 with an
 * exception set. */
static int
take_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *codes,
            const char *kind, int writable, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize || !native_item(view->format, codes)) {
        PyErr_Format(PyExc_ValueError, "%s must be a 1-d array of %s", what, kind);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#endif
