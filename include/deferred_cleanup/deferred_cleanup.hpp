// SPDX-License-Identifier: Apache-2.0
// deferred_cleanup.hpp: the generic core in one include.
//
// Header-only C++17; no Python.h, no CUDA, no test hooks.  An extension
// includes this, makes one deferred_cleanup::Queue with a Host (or uses the
// CPython host of deferred_cleanup/cpython/), makes typed items with
// make_item() and hands them to the main thread with hand_off() from any
// thread.  The comparison policies (deferred_cleanup/comparison/) and the
// driver interface of the reference module (deferred_cleanup/driver.hpp) are
// not included.
#pragma once

#include "deferred_cleanup/callback.hpp"    // IWYU pragma: export
#include "deferred_cleanup/drain.hpp"       // IWYU pragma: export
#include "deferred_cleanup/host.hpp"        // IWYU pragma: export
#include "deferred_cleanup/item.hpp"        // IWYU pragma: export
#include "deferred_cleanup/policy.hpp"      // IWYU pragma: export
#include "deferred_cleanup/queue.hpp"       // IWYU pragma: export
#include "deferred_cleanup/rearm.hpp"       // IWYU pragma: export
#include "deferred_cleanup/scheduling.hpp"  // IWYU pragma: export
#include "deferred_cleanup/shutdown.hpp"    // IWYU pragma: export
#include "deferred_cleanup/version.hpp"     // IWYU pragma: export
#include "deferred_cleanup/visibility.hpp"  // IWYU pragma: export
