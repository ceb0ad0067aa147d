// SPDX-License-Identifier: Apache-2.0
// driver_cuda.cpp: the `cuda` driver, on the real CUDA driver API.
//
// libcuda is never linked: the extension must import on machines with no GPU
// and no driver.  The constructor opens libcuda.so.1 with dlopen, takes only
// cuGetProcAddress from dlsym, and resolves every other entry point through
// it (CUDA Driver API, "Driver Entry Point Access", CUDA 12).  cuda.h comes
// from the toolkit at build time (CMake: DC_HAVE_CUDA_H); without it the
// driver reports itself unavailable.
//
// User objects: cuUserObjectCreate(..., CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
// then cuGraphRetainUserObject(..., CU_GRAPH_USER_OBJECT_MOVE) hands our only
// reference to the graph.  CUDA calls the destructor on an internal thread
// once the graph and every executable graph instantiated from it are
// destroyed (and any launch using them is complete).
//
// Spin option (CudaOptions::spin_us > 0): every graph gets one kernel node
// that spins on %globaltimer for spin_us microseconds, before its empty node,
// so a launch from instantiate() keeps the graph's user objects alive for that
// long and their destructors run on CUDA's thread after it (used by
// tools/gpu_compare.py to line our driver up with cuda-core's graphs).
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "drivers.hpp"

#if DC_HAVE_CUDA_H
#include <cuda.h>
#endif

namespace deferred_cleanup {

#if !DC_HAVE_CUDA_H

std::unique_ptr<Driver> make_cuda_driver(CudaInfo*, const CudaOptions&) {
  throw DriverUnavailable(
      "cuda driver: the extension was built without cuda.h (CUDA toolkit not found by CMake)");
}

#else

namespace {

// Entry-point types written against cuda.h's declarations (CUDA 12 ABI).
#if CUDA_VERSION >= 12000
using PFN_getProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult*);
#else
using PFN_getProcV2 = void*;  // cuda.h older than 12.0: only the v1 entry point is used
#endif
using PFN_getProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
using PFN_init = CUresult (*)(unsigned int);
using PFN_driverGetVersion = CUresult (*)(int*);
using PFN_deviceGetCount = CUresult (*)(int*);
using PFN_deviceGet = CUresult (*)(CUdevice*, int);
using PFN_deviceGetName = CUresult (*)(char*, int, CUdevice);
using PFN_primaryCtxRetain = CUresult (*)(CUcontext*, CUdevice);
using PFN_primaryCtxRelease = CUresult (*)(CUdevice);
using PFN_ctxSetCurrent = CUresult (*)(CUcontext);
using PFN_graphCreate = CUresult (*)(CUgraph*, unsigned int);
using PFN_graphAddEmptyNode = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t);
using PFN_userObjectCreate = CUresult (*)(CUuserObject*, void*, CUhostFn, unsigned int,
                                          unsigned int);
using PFN_userObjectRelease = CUresult (*)(CUuserObject, unsigned int);
using PFN_graphRetainUserObject = CUresult (*)(CUgraph, CUuserObject, unsigned int, unsigned int);
using PFN_graphInstantiate = CUresult (*)(CUgraphExec*, CUgraph, unsigned long long);
using PFN_graphLaunch = CUresult (*)(CUgraphExec, CUstream);
using PFN_streamSynchronize = CUresult (*)(CUstream);
using PFN_graphExecDestroy = CUresult (*)(CUgraphExec);
using PFN_graphDestroy = CUresult (*)(CUgraph);
using PFN_moduleLoadData = CUresult (*)(CUmodule*, const void*);
using PFN_moduleGetFunction = CUresult (*)(CUfunction*, CUmodule, const char*);
using PFN_moduleUnload = CUresult (*)(CUmodule);
#if CUDA_VERSION >= 12000
// cuGetProcAddress("cuGraphAddKernelNode", 12000) returns the _v2 entry point,
// which takes CUDA_KERNEL_NODE_PARAMS_v2 (cudaTypedefs.h,
// PFN_cuGraphAddKernelNode_v12000).
using PFN_graphAddKernelNode = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                            const CUDA_KERNEL_NODE_PARAMS_v2*);
#else
using PFN_graphAddKernelNode = void*;
#endif
using PFN_getErrorName = CUresult (*)(CUresult, const char**);
using PFN_getErrorString = CUresult (*)(CUresult, const char**);

// The oldest API version whose semantics we rely on (user objects: 11.3;
// cuGraphInstantiateWithFlags: 11.4; cuGetProcAddress_v2: 12.0).
constexpr int kApiVersion = 12000;

// The spin kernel: `extern "C" __global__ void dc_spin(unsigned long long ns)`
// reads %globaltimer (nanoseconds) until ns have passed.  Generated from that
// CUDA C++ (two `asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t))` reads
// and a do/while on their difference) with `nvcc -ptx -arch=compute_75`
// (CUDA 13.0), comments dropped and `.version 9.0` lowered to 7.0 so that
// drivers from CUDA 11.0 on can JIT it (checked with `ptxas -arch=sm_75` and
// `-arch=sm_90`).  PTX ISA: "Special Registers: %globaltimer".
constexpr const char* kSpinPtx = R"ptx(
.version 7.0
.target sm_75
.address_size 64

.visible .entry dc_spin(
	.param .u64 dc_spin_param_0
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd2, [dc_spin_param_0];
	mov.u64 %rd3, %globaltimer;
$L__BB0_1:
	mov.u64 %rd4, %globaltimer;
	sub.s64 	%rd5, %rd4, %rd3;
	setp.lt.u64 	%p1, %rd5, %rd2;
	@%p1 bra 	$L__BB0_1;
	ret;
}
)ptx";

class CudaDriver final : public Driver {
 public:
  CudaDriver(CudaInfo* info, const CudaOptions& options) : spin_ns_(options.spin_us * 1000ull) {
    lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) {
      const char* why = dlerror();
      throw DriverUnavailable(
          std::string("cuda driver: cannot open libcuda.so.1 (no NVIDIA driver installed?): ") +
          (why ? why : "unknown dlopen error"));
    }
    // Never dlclose: destructors may still run on CUDA's threads at exit.
#if CUDA_VERSION >= 12000
    get_v2_ = reinterpret_cast<PFN_getProcV2>(dlsym(lib_, "cuGetProcAddress_v2"));
#endif
    if (get_v2_ == nullptr)
      get_v1_ = reinterpret_cast<PFN_getProcV1>(dlsym(lib_, "cuGetProcAddress"));
    if (get_v2_ == nullptr && get_v1_ == nullptr)
      throw DriverUnavailable(
          "cuda driver: libcuda.so.1 exports no cuGetProcAddress (driver older than CUDA 11.3)");
    load(init_, "cuInit");
    load(get_error_name_, "cuGetErrorName");
    load(get_error_string_, "cuGetErrorString");
    load(driver_get_version_, "cuDriverGetVersion");
    load(device_get_count_, "cuDeviceGetCount");
    load(device_get_, "cuDeviceGet");
    load(device_get_name_, "cuDeviceGetName");
    load(primary_retain_, "cuDevicePrimaryCtxRetain");
    load(primary_release_, "cuDevicePrimaryCtxRelease");
    load(ctx_set_current_, "cuCtxSetCurrent");
    load(graph_create_, "cuGraphCreate");
    load(graph_add_empty_node_, "cuGraphAddEmptyNode");
    load(user_object_create_, "cuUserObjectCreate");
    load(user_object_release_, "cuUserObjectRelease");
    load(graph_retain_user_object_, "cuGraphRetainUserObject");
    load(graph_instantiate_, "cuGraphInstantiateWithFlags");
    load(graph_launch_, "cuGraphLaunch");
    load(stream_synchronize_, "cuStreamSynchronize");
    load(graph_exec_destroy_, "cuGraphExecDestroy");
    load(graph_destroy_, "cuGraphDestroy");
    if (spin_ns_ != 0) {
#if CUDA_VERSION >= 12000
      load(module_load_data_, "cuModuleLoadData");
      load(module_get_function_, "cuModuleGetFunction");
      load(module_unload_, "cuModuleUnload");
      load(graph_add_kernel_node_, "cuGraphAddKernelNode");
#else
      throw DriverUnavailable(
          "cuda driver: spin_us needs cuda.h from CUDA 12.0 or later at build time");
#endif
    }

    CUresult rc = init_(0);
    if (rc != CUDA_SUCCESS) throw DriverUnavailable("cuda driver: cuInit failed: " + describe(rc));
    int count = 0;
    rc = device_get_count_(&count);
    if (rc != CUDA_SUCCESS)
      throw DriverUnavailable("cuda driver: cuDeviceGetCount failed: " + describe(rc));
    if (count < 1) throw DriverUnavailable("cuda driver: no CUDA device");
    check_unavailable(device_get_(&device_, 0), "cuDeviceGet");
    check_unavailable(primary_retain_(&ctx_, device_), "cuDevicePrimaryCtxRetain");
    have_ctx_ = true;
    check(ctx_set_current_(ctx_), "cuCtxSetCurrent");
    if (info != nullptr) {
      check(driver_get_version_(&info->driver_version), "cuDriverGetVersion");
      char name[256] = {0};
      check(device_get_name_(name, static_cast<int>(sizeof name) - 1, device_), "cuDeviceGetName");
      info->device_name = name;
    }
    if (spin_ns_ != 0) {
      // The driver JIT-compiles the PTX for device 0 (cuModuleLoadData).
      check(module_load_data_(&module_, kSpinPtx), "cuModuleLoadData (spin kernel PTX)");
      check(module_get_function_(&spin_fn_, module_, "dc_spin"), "cuModuleGetFunction(dc_spin)");
    }
  }

  ~CudaDriver() override {
    for (auto& [h, g] : graphs_) {
      (void)h;
      destroy_graph(g);
    }
    stream_synchronize_(
        nullptr);  // launches still in flight complete before the context is released
    if (module_ != nullptr) module_unload_(module_);
    if (have_ctx_) primary_release_(device_);
  }

  const char* name() const noexcept override { return "cuda"; }

  GraphHandle create_graph() override {
    check(ctx_set_current_(ctx_), "cuCtxSetCurrent");
    Entry e;
    check(graph_create_(&e.graph, 0), "cuGraphCreate");
    CUgraphNode spin = nullptr;
#if CUDA_VERSION >= 12000
    if (spin_ns_ != 0) {
      unsigned long long ns = spin_ns_;
      void* params[] = {&ns};  // copied by cuGraphAddKernelNode
      CUDA_KERNEL_NODE_PARAMS_v2 p{};
      p.func = spin_fn_;
      p.gridDimX = p.gridDimY = p.gridDimZ = 1;
      p.blockDimX = p.blockDimY = p.blockDimZ = 1;
      p.kernelParams = params;
      const CUresult krc = graph_add_kernel_node_(&spin, e.graph, nullptr, 0, &p);
      if (krc != CUDA_SUCCESS) {
        graph_destroy_(e.graph);
        throw DriverError("cuda driver: cuGraphAddKernelNode (spin kernel) failed: " +
                          describe(krc));
      }
    }
#endif
    CUgraphNode node = nullptr;
    const CUresult rc = graph_add_empty_node_(&node, e.graph, spin != nullptr ? &spin : nullptr,
                                              spin != nullptr ? 1 : 0);
    if (rc != CUDA_SUCCESS) {
      graph_destroy_(e.graph);
      throw DriverError("cuda driver: cuGraphAddEmptyNode failed: " + describe(rc));
    }
    const GraphHandle h = next_++;
    graphs_.emplace(h, e);
    return h;
  }

  AttachResult attach(GraphHandle graph, DestructorFn destructor, void* arg) override {
    Entry& e = find(graph);
    check(ctx_set_current_(ctx_), "cuCtxSetCurrent");
    CUuserObject uo = nullptr;
    // NO_DESTRUCTOR_SYNC is the only flag CUDA accepts: the destructor runs
    // on an internal thread, unsynchronized with any CUDA handle.
    CUresult rc = user_object_create_(&uo, arg, destructor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
    if (rc != CUDA_SUCCESS)
      return {AttachStatus::not_created, "cuda driver: cuUserObjectCreate failed: " + describe(rc)};
    // MOVE: the graph takes our one reference; from here only the graph's
    // destruction leads to the destructor.
    rc = graph_retain_user_object_(e.graph, uo, 1, CU_GRAPH_USER_OBJECT_MOVE);
    if (rc != CUDA_SUCCESS) {
      // Build the result before the release: once the destructor may run,
      // nothing here may throw (the caller would clean the payload twice).
      AttachResult r{AttachStatus::released,
                     "cuda driver: cuGraphRetainUserObject failed: " + describe(rc)};
      user_object_release_(uo, 1);  // our reference: the destructor runs, exactly once
      return r;
    }
    return {AttachStatus::attached, {}};
  }

  void instantiate(GraphHandle graph) override {
    Entry& e = find(graph);
    check(ctx_set_current_(ctx_), "cuCtxSetCurrent");
    if (e.exec == nullptr)
      check(graph_instantiate_(&e.exec, e.graph, 0), "cuGraphInstantiateWithFlags");
    // Launch without waiting: a destroy() right after it frees the executable
    // graph asynchronously on completion (cuGraphExecDestroy), so CUDA runs
    // those destructors on its internal thread.  The stream is synchronized
    // only in the driver's destructor.
    check(graph_launch_(e.exec, nullptr), "cuGraphLaunch");
  }

  void destroy(GraphHandle graph) override {
    Entry& e = find(graph);
    check(ctx_set_current_(ctx_), "cuCtxSetCurrent");
    destroy_graph(e);
    graphs_.erase(graph);
  }

 private:
  struct Entry {
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
  };

  template <typename F>
  void load(F& fn, const char* symbol) {
    void* p = nullptr;
    CUresult rc;
#if CUDA_VERSION >= 12000
    if (get_v2_ != nullptr) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
      rc = get_v2_(symbol, &p, kApiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
      if (rc == CUDA_SUCCESS && status != CU_GET_PROC_ADDRESS_SUCCESS) p = nullptr;
    } else {
      rc = get_v1_(symbol, &p, kApiVersion, CU_GET_PROC_ADDRESS_DEFAULT);
    }
#else
    rc = get_v1_(symbol, &p, kApiVersion, CU_GET_PROC_ADDRESS_DEFAULT);
#endif
    if (rc != CUDA_SUCCESS || p == nullptr)
      throw DriverUnavailable(std::string("cuda driver: cuGetProcAddress found no ") + symbol +
                              " for API version 12.0");
    fn = reinterpret_cast<F>(p);
  }

  std::string describe(CUresult rc) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (get_error_name_ != nullptr) get_error_name_(rc, &name);
    if (get_error_string_ != nullptr) get_error_string_(rc, &text);
    return std::string(name ? name : "CUresult") + " (" + std::to_string(static_cast<int>(rc)) +
           ")" + (text ? std::string(": ") + text : std::string());
  }

  void check(CUresult rc, const char* what) const {
    if (rc != CUDA_SUCCESS)
      throw DriverError(std::string("cuda driver: ") + what + " failed: " + describe(rc));
  }

  void check_unavailable(CUresult rc, const char* what) const {
    if (rc != CUDA_SUCCESS)
      throw DriverUnavailable(std::string("cuda driver: ") + what + " failed: " + describe(rc));
  }

  Entry& find(GraphHandle graph) {
    auto it = graphs_.find(graph);
    if (it == graphs_.end()) throw DriverError("cuda driver: unknown or destroyed graph");
    return it->second;
  }

  void destroy_graph(Entry& e) {
    if (e.exec != nullptr) graph_exec_destroy_(e.exec);
    if (e.graph != nullptr) graph_destroy_(e.graph);
    e.exec = nullptr;
    e.graph = nullptr;
  }

  void* lib_ = nullptr;
  PFN_getProcV2 get_v2_ = nullptr;
  PFN_getProcV1 get_v1_ = nullptr;
  PFN_init init_ = nullptr;
  PFN_getErrorName get_error_name_ = nullptr;
  PFN_getErrorString get_error_string_ = nullptr;
  PFN_driverGetVersion driver_get_version_ = nullptr;
  PFN_deviceGetCount device_get_count_ = nullptr;
  PFN_deviceGet device_get_ = nullptr;
  PFN_deviceGetName device_get_name_ = nullptr;
  PFN_primaryCtxRetain primary_retain_ = nullptr;
  PFN_primaryCtxRelease primary_release_ = nullptr;
  PFN_ctxSetCurrent ctx_set_current_ = nullptr;
  PFN_graphCreate graph_create_ = nullptr;
  PFN_graphAddEmptyNode graph_add_empty_node_ = nullptr;
  PFN_userObjectCreate user_object_create_ = nullptr;
  PFN_userObjectRelease user_object_release_ = nullptr;
  PFN_graphRetainUserObject graph_retain_user_object_ = nullptr;
  PFN_graphInstantiate graph_instantiate_ = nullptr;
  PFN_graphLaunch graph_launch_ = nullptr;
  PFN_streamSynchronize stream_synchronize_ = nullptr;
  PFN_graphExecDestroy graph_exec_destroy_ = nullptr;
  PFN_graphDestroy graph_destroy_ = nullptr;
  PFN_moduleLoadData module_load_data_ = nullptr;
  PFN_moduleGetFunction module_get_function_ = nullptr;
  PFN_moduleUnload module_unload_ = nullptr;
  PFN_graphAddKernelNode graph_add_kernel_node_ = nullptr;
  unsigned long long spin_ns_ = 0;
  CUmodule module_ = nullptr;
  CUfunction spin_fn_ = nullptr;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool have_ctx_ = false;
  std::unordered_map<GraphHandle, Entry> graphs_;
  GraphHandle next_ = 1;
};

}  // namespace

std::unique_ptr<Driver> make_cuda_driver(CudaInfo* info, const CudaOptions& options) {
  return std::make_unique<CudaDriver>(info, options);
}

#endif  // DC_HAVE_CUDA_H

}  // namespace deferred_cleanup
