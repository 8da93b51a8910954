/* kernelpack CuTe host entries: the fixed part of every generated NAME_entry.c (cute_host/entry.py writes the rest:
 * the library's object table and one typed entry per host program, then #includes this file first).
 *
 * An entry picks the export object whose arch runs on the current device -- the launch model's binary rule
 * (kp_model.h), as for kernels -- initializes it once per process and loads it once per device, then calls CuTe's
 * packed host function. Failures go to the thread's error state (csrc/kp_error.c, shared with the C library's
 * runtime). The driver is reached through the shim (shim.c: hidden symbols). Everything here is static.
 *
 * Before including this file the generated source defines KP_HOST_LIB (the library name, a string) and, when the
 * entries live inside a kernel library, KP_ERROR_HOOK (the library's hidden NAME_kp_host_error).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kp_model.h"
#include "kp_error.c"

#define KP_EXPORT __attribute__((visibility("default")))

/* the shim (shim.c, hidden symbols) */
int kp_shim_enter(void);
const char* kp_shim_open_error(void);
void kp_shim_set_default_device(int device);
int kp_shim_current_device(int* device);
int kp_shim_device_attribute(int* value, int attr, int device);

/* One export object: one host program compiled for one arch. */
typedef struct kp_cute_object {
    const char* arch;
    int major, minor;
    char suffix; /* 'a', 'f' or 0 */
    void (*init)(void**);
    void (*load)(void**);
    void (*entry)(void**, int32_t);
    void* library; /* cudaLibrary_t the object's cuda_init fills */
    int inited;
    unsigned char loaded[KP_MAX_DEVICES];
} kp_cute_object;

static pthread_mutex_t kp_lock = PTHREAD_MUTEX_INITIALIZER;

/* The object among objs[0..n) that runs best on the current device (kp_bin_rule_quality), initialized and loaded
 * for that device. */
static kp_status kp_prepare(const char* label, kp_cute_object* objs, int n, kp_cute_object** out) {
    int dev = 0, major = 0, minor = 0, r = kp_shim_current_device(&dev);
    if (r == KP_CUDA_SUCCESS) r = kp_shim_device_attribute(&major, KP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_shim_device_attribute(&minor, KP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (r != KP_CUDA_SUCCESS) {
        const char* why = kp_shim_open_error();
        if (why[0]) return kp_fail_cuda(KP_ERROR_NO_DRIVER, r, "%s: %s: %s", KP_HOST_LIB, label, why);
        return kp_fail_cuda(KP_ERROR_CUDA, r, "%s: %s: cannot query the current device (CUresult %d)", KP_HOST_LIB,
                            label, r);
    }
    if (dev < 0 || dev >= KP_MAX_DEVICES)
        return kp_fail(KP_ERROR_NO_DEVICE, "%s: %s: device %d is beyond the %d supported", KP_HOST_LIB, label, dev,
                       KP_MAX_DEVICES);
    kp_cute_object* o = NULL;
    int32_t best = 0;
    for (int i = 0; i < n; i++) {
        int32_t q = kp_bin_rule_quality(0, objs[i].major, objs[i].minor, objs[i].suffix, major, minor);
        if (q > best) o = &objs[i], best = q;
    }
    if (o == NULL)
        return kp_fail(KP_ERROR_NO_BINARY_FOR_ARCH, "%s: %s has no object for sm_%d%d (device %d)", KP_HOST_LIB, label,
                       major, minor, dev);
    if (!__atomic_load_n(&o->loaded[dev], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&kp_lock);
        int32_t ret = 0;
        void* lib_ptr = &o->library;
        if (!o->inited) {
            void* args[2] = {&lib_ptr, &ret};
            o->init(args);
            if (ret == 0) o->inited = 1;
        }
        if (ret == 0 && !o->loaded[dev]) {
            int32_t device = dev;
            void* args[3] = {&lib_ptr, &device, &ret};
            o->load(args);
            if (ret == 0) __atomic_store_n(&o->loaded[dev], 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&kp_lock);
        if (ret != 0)
            return kp_fail_cuda(KP_ERROR_CUDA, ret, "%s: %s: loading the %s object on device %d failed (CUresult %d)",
                                KP_HOST_LIB, label, o->arch, dev, (int)ret);
    }
    *out = o;
    return KP_SUCCESS;
}

/* Run a prepared object's packed host function; its CUresult becomes the entry's status. */
static kp_status kp_run_host(const char* fn, kp_cute_object* o, void** args, int32_t nargs, int32_t* ret) {
    o->entry(args, nargs);
    if (*ret != 0) return kp_fail_cuda(KP_ERROR_CUDA, *ret, "%s: the host program failed (CUresult %d)", fn, (int)*ret);
    kp_ok();
    return KP_SUCCESS;
}
