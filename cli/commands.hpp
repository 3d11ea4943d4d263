// The kverify command line: list, run, replay (and the internal __worker).
#pragma once

namespace kv {
/// Exit codes: 0 all pass, 1 any failure or error, 2 usage or configuration error.
int kverify_main(int argc, char** argv);
}  // namespace kv
