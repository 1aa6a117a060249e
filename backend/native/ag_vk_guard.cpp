//go:build ggml

// The guarded entry points of ggml-vulkan (declared in ag_ggml.h).
//
// ggml-vulkan reports failures as C++ exceptions: vk::IncompatibleDriverError
// from vkCreateInstance when the loader finds no driver,
// std::runtime_error for a GGML_VK_VISIBLE_DEVICES index past the devices,
// vk::SystemError from device creation or a memory query. An exception must
// not unwind into C or Go: uncaught, it aborts the whole process
// (std::terminate). Each function here calls one ggml entry point inside
// try/catch and turns an exception into a return code and a message.
//
// This file sees no ggml header: cgo compiles C++ with CGO_CPPFLAGS and
// CGO_CXXFLAGS, not the CGO_CFLAGS that carry ggml's include folder. The
// prototypes below are checked against ggml's own in ag_ggml.c.

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <exception>
#include <typeinfo>

extern "C" {
typedef struct ggml_backend *ggml_backend_t;
typedef struct ggml_backend_device *ggml_backend_dev_t;
int ggml_backend_vk_get_device_count(void);
ggml_backend_t ggml_backend_vk_init(size_t dev_num);
void ggml_backend_vk_get_device_description(int device, char *description, size_t description_size);
void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t *free, size_t *total);
}

// describe writes "<type>: <what>" of the exception being handled into err,
// e.g. "vk::IncompatibleDriverError: vk::createInstance: ErrorIncompatibleDriver".
static void describe(const char *what, char *err, size_t errlen) {
	const std::type_info *ti = abi::__cxa_current_exception_type();
	const char *name = ti ? ti->name() : "unknown exception";
	int status = 0;
	char *demangled = ti ? abi::__cxa_demangle(name, nullptr, nullptr, &status) : nullptr;
	snprintf(err, errlen, "%s: %s", status == 0 && demangled ? demangled : name, what ? what : "(no message)");
	std::free(demangled);
}

// GUARD runs body, returning 0, or -1 with the exception described in err.
#define GUARD(body)                          \
	try {                                    \
		body;                                \
		return 0;                            \
	} catch (const std::exception &e) {      \
		describe(e.what(), err, errlen);     \
	} catch (...) {                          \
		describe(nullptr, err, errlen);      \
	}                                        \
	return -1;

extern "C" int ag_vk_device_count(int *count, char *err, size_t errlen) {
	GUARD(*count = ggml_backend_vk_get_device_count())
}

extern "C" int ag_vk_init(size_t dev, ggml_backend_t *out, char *err, size_t errlen) {
	GUARD(*out = ggml_backend_vk_init(dev))
}

extern "C" int ag_vk_description(int dev, char *desc, size_t desclen, char *err, size_t errlen) {
	GUARD(ggml_backend_vk_get_device_description(dev, desc, desclen))
}

extern "C" int ag_dev_memory(ggml_backend_dev_t dev, size_t *free, size_t *total, char *err, size_t errlen) {
	GUARD(ggml_backend_dev_memory(dev, free, total))
}
