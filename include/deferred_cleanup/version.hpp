// SPDX-License-Identifier: Apache-2.0
// version.hpp: the library's version, as pyproject.toml states it.
//
// Semantic versioning (docs: "Stability"): the major number changes when a
// stable declaration changes incompatibly; before 1.0 the minor number does.
// tests/test_packaging.py checks that these macros match pyproject.toml.
#pragma once

/// Major version.  Thread: n/a (a macro).  Memory ordering: n/a.  Errors: n/a.
/// Source: pyproject.toml, [project] version.
#define DEFERRED_CLEANUP_VERSION_MAJOR 0
/// Minor version.  Thread: n/a (a macro).  Memory ordering: n/a.  Errors: n/a.
/// Source: pyproject.toml, [project] version.
#define DEFERRED_CLEANUP_VERSION_MINOR 1
/// Patch version.  Thread: n/a (a macro).  Memory ordering: n/a.  Errors: n/a.
/// Source: pyproject.toml, [project] version.
#define DEFERRED_CLEANUP_VERSION_PATCH 0
/// The version as one number, MAJOR * 10000 + MINOR * 100 + PATCH, for `#if`.
/// Thread: n/a (a macro).  Memory ordering: n/a.  Errors: n/a.
/// Source: pyproject.toml, [project] version.
#define DEFERRED_CLEANUP_VERSION                                                   \
  (DEFERRED_CLEANUP_VERSION_MAJOR * 10000 + DEFERRED_CLEANUP_VERSION_MINOR * 100 + \
   DEFERRED_CLEANUP_VERSION_PATCH)
/// The version as a string, "MAJOR.MINOR.PATCH".
/// Thread: n/a (a macro).  Memory ordering: n/a.  Errors: n/a.
/// Source: pyproject.toml, [project] version.
#define DEFERRED_CLEANUP_VERSION_STRING "0.1.0"
