// Catch2's runner for the whole single-process suite.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
