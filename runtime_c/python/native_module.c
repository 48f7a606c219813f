/* The host build of the runtime as a CPython module. Importing it loads the
 * runtime and kernels into the process; Python calls them through ctypes on
 * this module's file, so the host runs the same C as the device. The program
 * interpreter is exposed as a type (native_program.c, used by mcu/runtime.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mcu/status.h"

static PyObject *status_str(PyObject *self, PyObject *arg)
{
    (void)self;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyUnicode_FromString(mcu_status_str((mcu_status)code));
}

static PyMethodDef native_methods[] = {
    {"status_str", status_str, METH_O, "Name of an mcu_status code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native", "Host build of the mcu C runtime.", -1, native_methods,
    NULL, NULL, NULL, NULL,
};

int mcu_native_add_program(PyObject *module); /* native_program.c */

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *module = PyModule_Create(&native_module);
    if (module != NULL && mcu_native_add_program(module) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
