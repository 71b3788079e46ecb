// Include this instead of Catch2 directly: works with Debian's Catch2 2.13
// (single header) and Ubuntu's Catch2 3.x (split headers).
#pragma once
#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
