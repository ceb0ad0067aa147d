// SPDX-License-Identifier: Apache-2.0
// visibility.hpp: no object of the core is shared between two extensions.
//
// Two extensions built against these headers each get their own copy of every
// object the headers define (the published-queue slot of callback.hpp, the
// constants).  On ELF, g++ emits a C++17 inline variable or a variable
// template with default visibility as a STB_GNU_UNIQUE symbol, and the
// dynamic loader binds every STB_GNU_UNIQUE symbol of a name to one
// definition process-wide, even for libraries loaded with RTLD_LOCAL (as
// CPython loads extensions): the second extension would silently use the
// first one's queue.  Hidden visibility keeps such an object out of the
// dynamic symbol table, so each extension (each shared object) has its own,
// while the translation units of one extension still share one.  Types stay
// at default visibility: a hidden type as a field of a user's default-
// visibility struct makes g++ warn (-Wattributes).
//
// tests/test_isolation.py builds two extensions against these headers with
// default visibility, checks their dynamic symbol tables for STB_GNU_UNIQUE,
// and loads both into one process.
#pragma once

/// Marks an object defined in a header as local to the shared object that
/// includes it (hidden visibility on ELF; nothing elsewhere).
///
/// Thread: n/a (a macro).  Memory ordering: n/a.  Errors: n/a.
/// Source: GCC manual, "Common Variable Attributes" (visibility) and the
/// -fno-gnu-unique option (STB_GNU_UNIQUE for inline and template static
/// objects); pybind11 hides its whole namespace the same way
/// (PYBIND11_NAMESPACE, pybind11/detail/common.h).
#if defined(__GNUC__) && !defined(_WIN32) && !defined(__CYGWIN__)
#define DEFERRED_CLEANUP_LOCAL __attribute__((visibility("hidden")))
#else
#define DEFERRED_CLEANUP_LOCAL
#endif
