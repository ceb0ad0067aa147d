# SPDX-License-Identifier: Apache-2.0
# Cython declarations of the C API of deferred-cleanup's CPython host
# (deferred_cleanup.h beside this file: its comments state each function's
# thread, blocking, memory ordering and errors).  cimport it as
#   from deferred_cleanup cimport *
# and link the extension with the CMake target deferred_cleanup::cpython.
from libc.stdint cimport int64_t, uint64_t

cdef extern from "deferred_cleanup/cpython/deferred_cleanup.h":
    ctypedef struct dc_host:
        pass
    ctypedef struct dc_item:
        pass
    ctypedef void (*dc_cleanup_fn)(void* payload) noexcept

    ctypedef struct dc_host_options:
        int64_t exit_wait_ns
        uint64_t (*outstanding)(void* ctx) noexcept
        void* outstanding_ctx

    ctypedef struct dc_counters:
        uint64_t handed_off
        uint64_t handed_off_late
        uint64_t cleaned
        uint64_t cleaned_off_main
        uint64_t pending_calls
        uint64_t direct_drains
        uint64_t deferred_interrupts
        uint64_t unraisable
        uint64_t leaked_at_exit
        int exit_sequence_ran
        int host_alive
        uint64_t interrupts_held_at_flush

    # Main thread, GIL held; NULL with an exception set on error.
    dc_host* dc_host_get(const dc_host_options* opts) except NULL
    # Any thread, no GIL needed.  dc_item_new: NULL when out of memory or
    # cleanup is NULL (no exception set).  dc_item_payload: NULL for NULL.
    dc_item* dc_item_new(dc_cleanup_fn cleanup, void* payload) noexcept nogil
    void* dc_item_payload(const dc_item* item) noexcept nogil
    void dc_item_discard(dc_item* item) noexcept nogil
    # 0, or -1 (no exception set; the item stays yours) for a NULL item or a
    # host that is not this extension's.
    int dc_hand_off(dc_host* host, dc_item* item) noexcept nogil
    # GIL held; -1 with an exception set.
    int dc_entry(dc_host* host) except -1
    int64_t dc_drain_now(dc_host* host) except -1
    void dc_get_counters(const dc_host* host, dc_counters* out) noexcept nogil
