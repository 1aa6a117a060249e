//go:build ggml

#include <string.h>
#include <vulkan/vulkan.h>

#include "ag_ggml.h"

int ag_vk_probe(ag_vk_device *out, int max) {
	VkApplicationInfo app = {0};
	app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
	app.pApplicationName = "ag-probe";
	app.apiVersion = VK_API_VERSION_1_1;
	VkInstanceCreateInfo ci = {0};
	ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
	ci.pApplicationInfo = &app;
	VkInstance inst;
	VkResult r = vkCreateInstance(&ci, NULL, &inst);
	if (r != VK_SUCCESS) {
		return r < 0 ? (int)r : -1;
	}
	uint32_t n = 0;
	vkEnumeratePhysicalDevices(inst, &n, NULL);
	VkPhysicalDevice devs[AG_VK_MAX_DEVICES];
	if (n > AG_VK_MAX_DEVICES) {
		n = AG_VK_MAX_DEVICES;
	}
	vkEnumeratePhysicalDevices(inst, &n, devs);
	int k = 0;
	for (uint32_t i = 0; i < n && k < max; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(devs[i], &p);
		strncpy(out[k].name, p.deviceName, sizeof(out[k].name) - 1);
		out[k].name[sizeof(out[k].name) - 1] = 0;
		out[k].type = (int)p.deviceType;
		k++;
	}
	vkDestroyInstance(inst, NULL);
	return k;
}

void ag_bind(struct ggml_tensor **leaves, struct ggml_tensor **srcs, int n,
             struct ggml_tensor **views, int nviews) {
	for (int i = 0; i < n; i++) {
		leaves[i]->buffer = srcs[i]->buffer;
		leaves[i]->data = srcs[i]->data;
	}
	// views are listed in graph order, so a view of a view sees its source
	// already re-pointed.
	for (int i = 0; i < nviews; i++) {
		struct ggml_tensor *v = views[i];
		v->buffer = v->view_src->buffer;
		v->data = (char *)v->view_src->data + v->view_offs;
	}
}

void ag_mark_bound(struct ggml_tensor **leaves, int n, ggml_backend_buffer_t buf) {
	void *base = ggml_backend_buffer_get_base(buf);
	for (int i = 0; i < n; i++) {
		leaves[i]->buffer = buf;
		leaves[i]->data = base;
	}
}

enum ggml_status ag_tensor_alloc_at(ggml_backend_buffer_t buf, struct ggml_tensor *t, size_t off) {
	return ggml_backend_tensor_alloc(buf, t, (char *)ggml_backend_buffer_get_base(buf) + off);
}
