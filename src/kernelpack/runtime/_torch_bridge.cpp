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

// The kp_dtype of every ScalarType value (an int8 enum), from the launch model's table (KP_TORCH_DTYPES), filled at
// import: one load per tensor instead of a switch
int8_t dtype_table[256];

void fill_dtype_table() {
    for (int i = 0; i < 256; i++) dtype_table[i] = KP_DT_ANY;
#define KP_ENTRY(scalar, code) dtype_table[static_cast<uint8_t>(c10::ScalarType::scalar)] = code;
    KP_TORCH_DTYPES(KP_ENTRY)
#undef KP_ENTRY
}

// One tensor: its TensorImpl read once through torch's inline accessors (policy-checked as at::Tensor's are).
// flatten (on the caller) inlines them all, is_contiguous included.
inline void read_tensor(c10::TensorImpl* t, bool with_dims, kp_view* out) {
    c10::Device d = t->device();
    if (C10_LIKELY(d.is_cuda())) {
        out->device = static_cast<int16_t>(d.index());
    } else if (d.is_cpu() && cpu_as_cuda) {
        out->device = 0;
    } else {
        out->device = KP_VIEW_ELSEWHERE;
        return;
    }
    // mutable, as Tensor::data_ptr(): a copy-on-write storage is materialized before a kernel may write it (the
    // storage's one flag test when it is not one). The steps of TensorImpl::mutable_data(), less its virtual
    // has_storage() call: a set storage_ is what every torch TensorImpl's has_storage() answers; without one (sparse,
    // batched, opaque tensors), or without a dtype, mutable_data() itself decides (and throws where torch throws).
    const caffe2::TypeMeta m = t->dtype();
    c10::StorageImpl* st = t->unsafe_storage().unsafeGetStorageImpl();
    if (C10_LIKELY(st != nullptr && m.isScalarType())) {
        char* base = static_cast<char*>(st->mutable_data());
        out->data = t->numel() == 0 ? 0 : reinterpret_cast<uint64_t>(base + m.itemsize() * t->storage_offset());
    } else {
        out->data = reinterpret_cast<uint64_t>(t->mutable_data());
    }
    if (with_dims) {
        out->ndim = static_cast<int32_t>(t->dim());
        out->shape = t->sizes().data();
        out->stride = t->strides().data();
    }
    out->dtype = C10_LIKELY(m.isScalarType()) ? dtype_table[static_cast<uint8_t>(m.toScalarType())] : KP_DT_ANY;
    out->contiguous = t->is_contiguous() ? 1 : 0;
}

// The arguments of one launch that may be tensors (kp_bridge.unpack_args): one call and one try per launch, not per
// tensor. A plain torch.Tensor is known by its exact type; the Python scalars the launcher reads itself are skipped by
// type; anything else goes through torch's THPVariable_Check (subclasses, Parameter).
__attribute__((flatten)) int unpack_args(PyObject* const* args, const uint8_t* which, int n, const uint8_t* dims,
                                         kp_view* out) {
    PyTypeObject* const tensor_type = reinterpret_cast<PyTypeObject*>(THPVariableClass);
    int count = 0;
    try {
        for (int k = 0; k < n; k++) {
            const int i = which[k];
            PyObject* o = args[i];
            PyTypeObject* tp = Py_TYPE(o);
            if (C10_UNLIKELY(tp != tensor_type) &&
                (tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyBool_Type || tp == &PyBytes_Type ||
                 !THPVariable_Check(o))) {
                out[i].device = KP_VIEW_NONE;
                continue;
            }
            read_tensor(THPVariable_Unpack(o).unsafeGetTensorImpl(), dims[i] != 0, &out[i]);
            count++;
        }
    } catch (...) {
        PyErr_Clear();
        return -1;
    }
    return count;
}

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
const kp_bridge api = {KP_BRIDGE_ABI, unpack_args, current_stream, 1};
#else
const kp_bridge api = {KP_BRIDGE_ABI, unpack_args, current_stream, 0};
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
    fill_dtype_table();
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
