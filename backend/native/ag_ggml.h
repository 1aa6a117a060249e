//go:build ggml

// C helpers for package native: the few things that are awkward or unsafe to
// do from Go through cgo (Vulkan device enumeration, re-pointing tensors at
// bound buffers without handing device addresses to the Go runtime).
#ifndef AG_GGML_H
#define AG_GGML_H

#include <stddef.h>
#include <stdint.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"

#define AG_VK_MAX_DEVICES 16

// ag_vk_device is one Vulkan physical device as the loader reports it.
typedef struct {
	char name[256];
	int type; // VkPhysicalDeviceType: 1 integrated, 2 discrete, 3 virtual, 4 CPU
} ag_vk_device;

// ag_vk_probe enumerates Vulkan physical devices with a throw-away instance
// (nothing lasts). It returns the number of devices written to out, or a
// negative VkResult when no instance could be created (no loader or driver).
int ag_vk_probe(ag_vk_device *out, int max);

// ag_bind points each leaves[i] at the memory of srcs[i] (a buffer's tensor),
// then re-derives the address of every view in views from its view_src.
// Program.Run calls it once per run: the graph itself is never re-planned.
void ag_bind(struct ggml_tensor **leaves, struct ggml_tensor **srcs, int n,
             struct ggml_tensor **views, int nviews);

// ag_mark_bound gives each leaf a placeholder address inside buf so that the
// graph allocator treats the leaves as externally allocated (it must not plan
// memory for args; ag_bind sets the real addresses at run time).
void ag_mark_bound(struct ggml_tensor **leaves, int n, ggml_backend_buffer_t buf);

// ag_tensor_alloc_at places t at byte offset off of buf (a slab chunk).
enum ggml_status ag_tensor_alloc_at(ggml_backend_buffer_t buf, struct ggml_tensor *t, size_t off);

#endif
