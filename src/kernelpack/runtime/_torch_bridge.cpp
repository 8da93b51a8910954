// kernelpack.runtime._torch_bridge: lets the C launch path read torch tensors without calling Python.
//
// Built against one torch version (its headers and libraries) when torch is importable at build time; the runtime
// uses it only when torch.__version__ equals TORCH_VERSION. Reading a tensor here (pointer, dtype, device, sizes,
// strides, contiguity) costs tens of nanoseconds; the same through Python attributes costs ~60 ns per attribute.
// With KP_TORCH_CUDA, torch's current stream is read from c10 directly as well.
#include <Python.h>

#include <torch/csrc/autograd/python_variable.h>
#ifdef KP_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

extern "C" {
#include "_kp_bridge.h"
#include "kp_model.h"
}

#ifndef KP_TORCH_VERSION
#error "KP_TORCH_VERSION must name the torch version the bridge is built against"
#endif

namespace {

int cpu_as_cuda = 0;  // tests without a GPU: CPU tensors read as tensors on cuda:0
// tests without a GPU, with cpu_as_cuda: torch's "current stream" of device d is test_stream + d, answered here in C as
// c10 answers it on a GPU; -1: none (the launcher asks the Python-level getter, as with a bridge built without CUDA)
long long test_stream = -1;

int8_t dtype_code(c10::ScalarType t) {
    switch (t) {
#define KP_CASE(scalar, code) case c10::ScalarType::scalar: return code;
    KP_TORCH_DTYPES(KP_CASE)
#undef KP_CASE
    default: return 0;
    }
}

// with_dims: also ndim, shape and stride (only tensor-descriptor params use them)
template <bool with_dims>
int read_tensor(PyObject* obj, kp_view* out) {
    try {
        if (!THPVariable_Check(obj)) return 0;
        // the TensorImpl once, then its inline accessors (at::Tensor's re-read the pointer each time)
        c10::TensorImpl* t = THPVariable_Unpack(obj).unsafeGetTensorImpl();
        c10::Device d = t->device();
        if (C10_LIKELY(d.is_cuda())) {
            out->device_type = 1;
            out->device = static_cast<int16_t>(d.index());
        } else if (d.is_cpu() && cpu_as_cuda) {
            out->device_type = 1;
            out->device = 0;
        } else {
            out->device_type = 0;
            out->device = -1;
            return 1;
        }
        // mutable, as Tensor::data_ptr(): a copy-on-write storage is materialized before a kernel may write it
        out->data = reinterpret_cast<uint64_t>(t->mutable_data());
        if (with_dims) {
            out->ndim = static_cast<int32_t>(t->dim());
            out->shape = t->sizes().data();
            out->stride = t->strides().data();
        }
        out->dtype = dtype_code(t->dtype().toScalarType());
        out->contiguous = t->is_contiguous() ? 1 : 0;
        return 1;
    } catch (...) {
        PyErr_Clear();
        return -1;
    }
}

int unpack(PyObject* obj, kp_view* out) { return read_tensor<true>(obj, out); }
int unpack_ptr(PyObject* obj, kp_view* out) { return read_tensor<false>(obj, out); }

int current_stream(int device, uint64_t* out) {
    if (cpu_as_cuda) {
        if (test_stream < 0) return -1;
        *out = static_cast<uint64_t>(test_stream) + static_cast<uint64_t>(device);
        return 0;
    }
#ifdef KP_TORCH_CUDA
    try {
        *out = reinterpret_cast<uint64_t>(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream());
        return 0;
    } catch (...) {
        return -1;
    }
#else
    return -1;
#endif
}

#ifdef KP_TORCH_CUDA
const kp_bridge api = {KP_BRIDGE_ABI, unpack, unpack_ptr, current_stream, 1};
#else
const kp_bridge api = {KP_BRIDGE_ABI, unpack, unpack_ptr, current_stream, 0};
#endif

PyObject* set_cpu_as_cuda(PyObject*, PyObject* flag) {
    int v = PyObject_IsTrue(flag);
    if (v < 0) return nullptr;
    cpu_as_cuda = v;
    Py_RETURN_NONE;
}

PyObject* set_test_stream(PyObject*, PyObject* handle) {
    if (handle == Py_None) {
        test_stream = -1;
        Py_RETURN_NONE;
    }
    long long v = PyLong_AsLongLong(handle);
    if (v == -1 && PyErr_Occurred()) return nullptr;
    if (v < 0) {
        PyErr_SetString(PyExc_ValueError, "set_test_stream: the handle must be None or an int >= 0");
        return nullptr;
    }
    test_stream = v;
    Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"set_cpu_as_cuda", set_cpu_as_cuda, METH_O, "Tests without a GPU: read CPU tensors as tensors on cuda:0."},
    {"set_test_stream", set_test_stream, METH_O,
     "Tests without a GPU (with set_cpu_as_cuda): torch's current stream of device d is handle + d (None: ask the "
     "Python getter)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "kernelpack.runtime._torch_bridge",
                          "Reads torch tensors for kernelpack's C launch path.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__torch_bridge(void) {
    PyObject* m = PyModule_Create(&module_def);
    if (m == nullptr) return nullptr;
    PyObject* cap = PyCapsule_New(const_cast<kp_bridge*>(&api), KP_BRIDGE_CAPSULE, nullptr);
    if (cap == nullptr || PyModule_AddObject(m, "api", cap) < 0 ||
        PyModule_AddStringConstant(m, "TORCH_VERSION", KP_TORCH_VERSION) < 0 ||
#ifdef KP_TORCH_CUDA
        PyModule_AddIntConstant(m, "CUDA_STREAMS", 1) < 0
#else
        PyModule_AddIntConstant(m, "CUDA_STREAMS", 0) < 0
#endif
    ) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
