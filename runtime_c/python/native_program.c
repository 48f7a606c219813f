/* The program interpreter as a CPython type: mcu._native.program_load() returns
 * a ProgramHandle over a private, 16-byte aligned copy of the file; mcu/runtime.py
 * wraps it. Interpreter statuses come back as numbers (never exceptions), so
 * Python decides the message; only Python-level misuse raises here. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "mcu/program.h"

/* The delegate backends this host build links, registered for every program loaded here: each
 * delegate's own C file puts a pointer to its backend in the section mcu_delegates
 * (MCU_DELEGATE_REGISTER in mcu/delegate.h; CMakeLists.txt compiles those whose libraries are
 * installed). The null entry keeps the section, and so its bounds, in a build without any. */
static const mcu_delegate_backend *const native_no_delegate __attribute__((used, section("mcu_delegates"))) = NULL;
extern const mcu_delegate_backend *const __start_mcu_delegates[] __attribute__((visibility("hidden")));
extern const mcu_delegate_backend *const __stop_mcu_delegates[] __attribute__((visibility("hidden")));
#define NATIVE_MAX_PARTITIONS 256u
/* Builtin backends plus those a caller adds for one program (user custom kernels, mcu/custom_host.py). */
#define NATIVE_MAX_DELEGATES 32u

typedef struct {
    PyObject_HEAD
    void *program_mem;
    void *weights_mem;
    mcu_program program;
    int loaded;
    void *delegate_handles[NATIVE_MAX_PARTITIONS]; /* one per delegated partition of the program */
    const mcu_delegate_backend *delegates[NATIVE_MAX_DELEGATES]; /* the registry this program loaded with */
    /* Arenas kept from one run to the next (run(..., keep=True)): model state such as a KV cache lives in
     * them across calls and methods, as in a device's static arenas. Sized for the largest method. */
    void *kept_raw[MCU_PROGRAM_MAX_ARENAS];
    uint8_t *kept[MCU_PROGRAM_MAX_ARENAS];
    uint32_t kept_sizes[MCU_PROGRAM_MAX_ARENAS];
    int kept_busy; /* a kept-arena run is executing (another thread must not share them) */
} ProgramHandle;

/* A copy of `src` at a 16-byte aligned address; `*raw` is what to free. */
static uint8_t *aligned_copy(const Py_buffer *src, void **raw)
{
    *raw = PyMem_RawMalloc((size_t)src->len + MCU_PROGRAM_ALIGN);
    if (*raw == NULL) {
        return NULL;
    }
    uint8_t *p = (uint8_t *)*raw;
    p += (MCU_PROGRAM_ALIGN - ((uintptr_t)p % MCU_PROGRAM_ALIGN)) % MCU_PROGRAM_ALIGN;
    memcpy(p, src->buf, (size_t)src->len);
    return p;
}

static void handle_dealloc(ProgramHandle *self)
{
    if (self->loaded) {
        mcu_program_unload(&self->program);
    }
    PyMem_RawFree(self->program_mem);
    PyMem_RawFree(self->weights_mem);
    for (uint32_t i = 0; i < MCU_PROGRAM_MAX_ARENAS; ++i) {
        PyMem_RawFree(self->kept_raw[i]);
    }
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *status_tuple(mcu_status status, PyObject *value)
{
    if (value == NULL) {
        return NULL;
    }
    return Py_BuildValue("(iN)", (int)status, value);
}

static PyObject *handle_method_count(ProgramHandle *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLong(self->program.n_methods);
}

static PyObject *handle_method_info(ProgramHandle *self, PyObject *arg)
{
    const unsigned long index = PyLong_AsUnsignedLong(arg);
    if (PyErr_Occurred()) {
        return NULL;
    }
    mcu_program_method_info info;
    const mcu_status status = mcu_program_method(&self->program, (uint32_t)index, &info);
    if (status != MCU_OK) {
        return status_tuple(status, Py_NewRef(Py_None));
    }
    PyObject *arenas = PyList_New(info.n_arenas);
    if (arenas == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < info.n_arenas; ++i) {
        PyList_SET_ITEM(arenas, i, PyLong_FromUnsignedLong(info.arena_sizes[i]));
    }
    return status_tuple(status, Py_BuildValue("{s:s,s:I,s:I,s:I,s:I,s:N}", "name", info.name, "n_inputs",
                                              info.n_inputs, "n_outputs", info.n_outputs, "n_instructions",
                                              info.n_instructions, "n_bundled", info.n_bundled, "arena_sizes",
                                              arenas));
}

static PyObject *handle_io_info(ProgramHandle *self, PyObject *args)
{
    unsigned int method, output, index;
    if (!PyArg_ParseTuple(args, "III", &method, &output, &index)) {
        return NULL;
    }
    mcu_program_tensor_info t;
    const mcu_status status = mcu_program_io(&self->program, method, output, index, &t);
    if (status != MCU_OK) {
        return status_tuple(status, Py_NewRef(Py_None));
    }
    PyObject *shape = PyTuple_New(t.rank);
    PyObject *order = PyTuple_New(t.rank);
    if (shape == NULL || order == NULL) {
        Py_XDECREF(shape);
        Py_XDECREF(order);
        return NULL;
    }
    for (uint32_t i = 0; i < t.rank; ++i) {
        PyTuple_SET_ITEM(shape, i, PyLong_FromLong(t.shape[i]));
        PyTuple_SET_ITEM(order, i, PyLong_FromLong(t.dim_order[i]));
    }
    PyObject *scale = t.quantized ? PyFloat_FromDouble(t.scale) : Py_NewRef(Py_None);
    return status_tuple(status, Py_BuildValue("{s:s,s:I,s:N,s:N,s:I,s:I,s:I,s:N,s:i,s:O}", "name", t.name, "dtype",
                                              t.dtype, "shape", shape, "dim_order", order, "arena", t.arena,
                                              "offset", t.offset, "nbytes", t.nbytes, "scale", scale,
                                              "zero_point", t.zero_point, "streamed",
                                              t.streamed ? Py_True : Py_False));
}

static PyObject *handle_find_method(ProgramHandle *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (name == NULL) {
        return NULL;
    }
    uint32_t index = 0;
    const mcu_status status = mcu_program_find_method(&self->program, name, &index);
    return status_tuple(status, PyLong_FromUnsignedLong(index));
}

/* The kept arenas, allocated zeroed at the largest size any method asks for; 0 on failure (exception set). */
static int ensure_kept(ProgramHandle *self)
{
    if (self->kept[0] != NULL) {
        return 1;
    }
    uint32_t sizes[MCU_PROGRAM_MAX_ARENAS] = {0};
    for (uint32_t m = 0; m < self->program.n_methods; ++m) {
        mcu_program_method_info info;
        if (mcu_program_method(&self->program, m, &info) != MCU_OK) {
            continue;
        }
        for (uint32_t i = 0; i < info.n_arenas; ++i) {
            sizes[i] = info.arena_sizes[i] > sizes[i] ? info.arena_sizes[i] : sizes[i];
        }
    }
    for (uint32_t i = 0; i < MCU_PROGRAM_MAX_ARENAS; ++i) {
        self->kept_raw[i] = PyMem_RawCalloc(1, (size_t)sizes[i] + MCU_PROGRAM_ALIGN);
        if (self->kept_raw[i] == NULL) {
            PyErr_NoMemory();
            return 0;
        }
        uint8_t *p = (uint8_t *)self->kept_raw[i];
        self->kept[i] = p + (MCU_PROGRAM_ALIGN - ((uintptr_t)p % MCU_PROGRAM_ALIGN)) % MCU_PROGRAM_ALIGN;
        self->kept_sizes[i] = sizes[i];
    }
    return 1;
}

/* reset_state(): clears the kept arenas (the state a method left in them). */
static PyObject *handle_reset_state(ProgramHandle *self, PyObject *unused)
{
    (void)unused;
    for (uint32_t i = 0; i < MCU_PROGRAM_MAX_ARENAS; ++i) {
        if (self->kept[i] != NULL) {
            memset(self->kept[i], 0, self->kept_sizes[i]);
        }
    }
    Py_RETURN_NONE;
}

/* The host's reader of a streamed input: rows from a copy of the caller's input, which the method must ask
 * for top to bottom, each once (the contract of mcu_program_input_rows_fn, checked here). */
typedef struct {
    uint8_t *data;
    uint32_t row_bytes, rows, next;
} host_rows;

static mcu_status host_input_rows(void *context, int32_t first_row, int32_t rows, void *rows_out)
{
    host_rows *h = (host_rows *)context;
    if (rows < 1 || first_row != (int32_t)h->next || (uint32_t)rows > h->rows - h->next) {
        return MCU_ERR_INVALID_ARG;
    }
    memcpy(rows_out, h->data + (size_t)first_row * h->row_bytes, (size_t)rows * h->row_bytes);
    h->next += (uint32_t)rows;
    return MCU_OK;
}

/* run(method, inputs, arena_sizes or None, keep=False) -> (status, [bytes outputs] or None); with keep, the
 * handle's kept arenas (state survives the call) instead of fresh zeroed ones. */
static PyObject *handle_run(ProgramHandle *self, PyObject *args)
{
    unsigned int method;
    PyObject *inputs, *sizes_obj;
    int keep = 0;
    if (!PyArg_ParseTuple(args, "IOO|p", &method, &inputs, &sizes_obj, &keep)) {
        return NULL;
    }
    if (keep && (sizes_obj != Py_None || self->kept_busy)) {
        PyErr_SetString(PyExc_ValueError, "keep=True runs in the kept arenas: no arena_sizes, one run at a time");
        return NULL;
    }
    if (keep && !ensure_kept(self)) {
        return NULL;
    }
    mcu_program_method_info info;
    mcu_status status = mcu_program_method(&self->program, method, &info);
    if (status != MCU_OK) {
        return status_tuple(status, Py_NewRef(Py_None));
    }
    PyObject *seq = PySequence_Fast(inputs, "inputs must be a sequence of buffers");
    if (seq == NULL) {
        return NULL;
    }
    if ((uint32_t)PySequence_Fast_GET_SIZE(seq) != info.n_inputs) {
        PyErr_Format(PyExc_ValueError, "method %s takes %u inputs, got %zd", info.name, info.n_inputs,
                     PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return NULL;
    }
    uint32_t sizes[MCU_PROGRAM_MAX_ARENAS];
    uint32_t n_arenas = info.n_arenas;
    memcpy(sizes, info.arena_sizes, sizeof(sizes));
    if (sizes_obj != Py_None) {
        PyObject *s = PySequence_Fast(sizes_obj, "arena_sizes must be a sequence of ints");
        if (s == NULL || PySequence_Fast_GET_SIZE(s) > MCU_PROGRAM_MAX_ARENAS) {
            if (s != NULL) {
                PyErr_SetString(PyExc_ValueError, "too many arenas");
            }
            Py_XDECREF(s);
            Py_DECREF(seq);
            return NULL;
        }
        n_arenas = (uint32_t)PySequence_Fast_GET_SIZE(s);
        for (uint32_t i = 0; i < n_arenas; ++i) {
            sizes[i] = (uint32_t)PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(s, i));
        }
        Py_DECREF(s);
        if (PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    void *raw[MCU_PROGRAM_MAX_ARENAS] = {NULL};
    uint8_t *arenas[MCU_PROGRAM_MAX_ARENAS] = {NULL};
    host_rows streamed = {NULL, 0, 0, 0};
    PyObject *result = NULL;
    if (keep) {
        n_arenas = MCU_PROGRAM_MAX_ARENAS;
        memcpy(sizes, self->kept_sizes, sizeof(sizes));
        memcpy(arenas, self->kept, sizeof(arenas));
        self->kept_busy = 1;
    }
    for (uint32_t i = 0; i < n_arenas && !keep; ++i) {
        raw[i] = PyMem_RawCalloc(1, (size_t)sizes[i] + MCU_PROGRAM_ALIGN);
        if (raw[i] == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        arenas[i] = (uint8_t *)raw[i] + (MCU_PROGRAM_ALIGN - ((uintptr_t)raw[i] % MCU_PROGRAM_ALIGN)) % MCU_PROGRAM_ALIGN;
    }
    for (uint32_t i = 0; i < info.n_inputs; ++i) {
        mcu_program_tensor_info t;
        status = mcu_program_io(&self->program, method, 0, i, &t);
        if (status != MCU_OK) {
            result = status_tuple(status, Py_NewRef(Py_None));
            goto done;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &view, PyBUF_CONTIG_RO) != 0) {
            goto done;
        }
        const int fits = (uint64_t)view.len == t.nbytes &&
                         (t.streamed || (t.arena < n_arenas && (uint64_t)t.offset + t.nbytes <= sizes[t.arena]));
        if (fits && t.streamed && streamed.data == NULL) { /* read by rows through host_input_rows */
            streamed.data = PyMem_RawMalloc(t.nbytes > 0 ? t.nbytes : 1u);
            if (streamed.data == NULL) {
                PyBuffer_Release(&view);
                PyErr_NoMemory();
                goto done;
            }
            memcpy(streamed.data, view.buf, t.nbytes);
            streamed.rows = (uint32_t)t.shape[2]; /* the loader proved rank 4 and whole rows */
            streamed.row_bytes = t.nbytes / streamed.rows;
        } else if (fits) {
            memcpy(arenas[t.arena] + t.offset, view.buf, t.nbytes);
        }
        PyBuffer_Release(&view);
        if (!fits) {
            if ((uint64_t)view.len != t.nbytes) {
                PyErr_Format(PyExc_ValueError, "input %u of %s needs %u bytes, got %zd", i, info.name, t.nbytes,
                             view.len);
                goto done;
            }
            result = status_tuple(MCU_ERR_BUFFER_TOO_SMALL, Py_NewRef(Py_None));
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    status = mcu_program_execute_streamed(&self->program, method, arenas, sizes, n_arenas,
                                          streamed.data != NULL ? host_input_rows : NULL, &streamed);
    Py_END_ALLOW_THREADS
    if (status == MCU_OK && streamed.data != NULL && streamed.next != streamed.rows) {
        status = MCU_ERR_INVALID_ARG; /* a streamed input not read to its end */
    }
    if (status != MCU_OK) {
        result = status_tuple(status, Py_NewRef(Py_None));
        goto done;
    }
    PyObject *outs = PyList_New(info.n_outputs);
    if (outs == NULL) {
        goto done;
    }
    for (uint32_t i = 0; i < info.n_outputs; ++i) {
        mcu_program_tensor_info t;
        status = mcu_program_io(&self->program, method, 1, i, &t);
        PyObject *b = status == MCU_OK ? PyBytes_FromStringAndSize((const char *)arenas[t.arena] + t.offset,
                                                                     (Py_ssize_t)t.nbytes)
                                       : Py_NewRef(Py_None);
        if (b == NULL) {
            Py_DECREF(outs);
            goto done;
        }
        PyList_SET_ITEM(outs, i, b);
    }
    result = status_tuple(MCU_OK, outs);
done:
    for (uint32_t i = 0; i < MCU_PROGRAM_MAX_ARENAS; ++i) {
        PyMem_RawFree(raw[i]);
    }
    PyMem_RawFree(streamed.data);
    self->kept_busy = keep ? 0 : self->kept_busy;
    Py_DECREF(seq);
    return result;
}

static PyObject *handle_bundled(ProgramHandle *self, PyObject *args)
{
    unsigned int method, vector, expected, index;
    if (!PyArg_ParseTuple(args, "IIII", &method, &vector, &expected, &index)) {
        return NULL;
    }
    const uint8_t *data = NULL;
    uint32_t size = 0;
    float tolerance = 0.0f;
    const mcu_status status = mcu_program_bundled(&self->program, method, vector, expected, index, &data, &size,
                                                  &tolerance);
    if (status != MCU_OK) {
        return status_tuple(status, Py_NewRef(Py_None));
    }
    return status_tuple(status, Py_BuildValue("(y#d)", (const char *)data, (Py_ssize_t)size, (double)tolerance));
}

static PyMethodDef handle_methods[] = {
    {"method_count", (PyCFunction)handle_method_count, METH_NOARGS, "Number of methods."},
    {"method_info", (PyCFunction)handle_method_info, METH_O, "(status, dict) for method i."},
    {"io_info", (PyCFunction)handle_io_info, METH_VARARGS, "(status, dict) for (method, is_output, index)."},
    {"find_method", (PyCFunction)handle_find_method, METH_O, "(status, index) of a method name."},
    {"run", (PyCFunction)handle_run, METH_VARARGS, "(status, outputs) of (method, inputs, arena_sizes, keep)."},
    {"reset_state", (PyCFunction)handle_reset_state, METH_NOARGS, "Clear the kept arenas."},
    {"bundled", (PyCFunction)handle_bundled, METH_VARARGS,
     "(status, (bytes, tolerance)) of (method, vector, expected, index)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot handle_slots[] = {
    {Py_tp_dealloc, (void *)handle_dealloc},
    {Py_tp_methods, handle_methods},
    {Py_tp_doc, (void *)"A verified program file (see mcu.runtime.Program)."},
    {0, NULL},
};

static PyType_Spec handle_spec = {
    "mcu._native.ProgramHandle", sizeof(ProgramHandle), 0, Py_TPFLAGS_DEFAULT, handle_slots,
};

/* program_load(program, weights or None, flags, arena_limit=0, extra_delegates=()) -> (status, ProgramHandle or
 * None). extra_delegates: addresses of mcu_delegate_backend structs in a library the caller keeps loaded. */
static PyObject *program_load(PyObject *module, PyObject *args)
{
    Py_buffer program, weights = {0};
    PyObject *weights_obj, *extra = NULL;
    unsigned int flags, arena_limit = 0;
    if (!PyArg_ParseTuple(args, "y*OI|IO", &program, &weights_obj, &flags, &arena_limit, &extra)) {
        return NULL;
    }
    const mcu_delegate_backend *registry[NATIVE_MAX_DELEGATES];
    uint32_t n_registry = 0;
    for (const mcu_delegate_backend *const *linked = __start_mcu_delegates; linked < __stop_mcu_delegates; ++linked) {
        if (*linked != NULL && n_registry < NATIVE_MAX_DELEGATES) {
            registry[n_registry++] = *linked;
        }
    }
    if (extra != NULL && extra != Py_None) {
        PyObject *seq = PySequence_Fast(extra, "extra_delegates must be a sequence of addresses");
        if (seq == NULL) {
            PyBuffer_Release(&program);
            return NULL;
        }
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t i = 0; i < n; ++i) {
            void *address = PyLong_AsVoidPtr(PySequence_Fast_GET_ITEM(seq, i));
            if (address == NULL || n_registry == NATIVE_MAX_DELEGATES) {
                Py_DECREF(seq);
                PyBuffer_Release(&program);
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError, "extra_delegates: a NULL address, or too many backends");
                }
                return NULL;
            }
            registry[n_registry++] = (const mcu_delegate_backend *)address;
        }
        Py_DECREF(seq);
    }
    if (weights_obj != Py_None && PyObject_GetBuffer(weights_obj, &weights, PyBUF_CONTIG_RO) != 0) {
        PyBuffer_Release(&program);
        return NULL;
    }
    PyObject *type = PyObject_GetAttrString(module, "ProgramHandle");
    ProgramHandle *h = type != NULL ? PyObject_New(ProgramHandle, (PyTypeObject *)type) : NULL;
    Py_XDECREF(type);
    PyObject *result = NULL;
    if (h == NULL) {
        goto done;
    }
    h->program_mem = NULL;
    h->weights_mem = NULL;
    h->loaded = 0;
    memset(h->kept_raw, 0, sizeof(h->kept_raw)); /* PyObject_New leaves the fields unset */
    memset(h->kept, 0, sizeof(h->kept));
    memset(h->kept_sizes, 0, sizeof(h->kept_sizes));
    h->kept_busy = 0;
    memset(&h->program, 0, sizeof(h->program));
    if (program.len > UINT32_MAX || (weights.buf != NULL && weights.len > UINT32_MAX)) {
        result = status_tuple(MCU_ERR_PROGRAM_OVERSIZED, Py_NewRef(Py_None));
        goto done;
    }
    const uint8_t *p = aligned_copy(&program, &h->program_mem);
    const uint8_t *w = weights.buf != NULL ? aligned_copy(&weights, &h->weights_mem) : NULL;
    if (p == NULL || (weights.buf != NULL && w == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(h->delegates, registry, sizeof(registry[0]) * n_registry);
    const mcu_program_options options = {w, (uint32_t)weights.len, h->delegates, n_registry, flags,
                                         h->delegate_handles, NATIVE_MAX_PARTITIONS, arena_limit};
    mcu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = mcu_program_load(&h->program, p, (uint32_t)program.len, &options);
    Py_END_ALLOW_THREADS
    if (status != MCU_OK) {
        result = status_tuple(status, Py_NewRef(Py_None));
        goto done;
    }
    h->loaded = 1;
    result = status_tuple(MCU_OK, (PyObject *)h);
    h = NULL;
done:
    Py_XDECREF(h);
    PyBuffer_Release(&program);
    if (weights.buf != NULL) {
        PyBuffer_Release(&weights);
    }
    return result;
}

static PyMethodDef program_functions[] = {
    {"program_load", program_load, METH_VARARGS,
     "program_load(program, weights or None, flags, arena_limit=0, extra_delegates=()) -> (status, ProgramHandle "
     "or None)"},
    {NULL, NULL, 0, NULL},
};

int mcu_native_add_program(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &handle_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "ProgramHandle", type) != 0) {
        Py_DECREF(type);
        return -1;
    }
    return PyModule_AddFunctions(module, program_functions);
}
