// One deliberate bug per sanitizer (see CMakeLists.txt). Each returns 0 when the bug goes
// unnoticed, so its WILL_FAIL test fails unless the sanitizer stopped the program.
#include <cstdio>
#include <cstdlib>
#include <thread>

int volatile sink;

int main(int argc, char**) {
#if defined(GP_CANARY_HEAP_OVERFLOW)
  int* p = static_cast<int*>(std::malloc(8 * sizeof(int)));
  p[7 + argc] = 1;  // one past the end
  sink = p[7 + argc];
  std::free(p);
#elif defined(GP_CANARY_SIGNED_OVERFLOW)
  int x = 0x7fffffff - 1 + argc;
  sink = x + 1;  // INT_MAX + 1
#elif defined(GP_CANARY_DATA_RACE)
  int shared = 0;
  std::thread t([&] { shared = argc; });
  shared = argc + 1;
  t.join();
  sink = shared;
#endif
  std::puts("canary: the bug went unnoticed");
  return 0;
}
