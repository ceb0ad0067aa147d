// SPDX-License-Identifier: Apache-2.0
// A C++ source of the user's own with default visibility: the package must not
// hide it (tests/test_capi.py reads the module's dynamic symbols).
extern "C" int capi_probe_user_cxx() { return 2; }
