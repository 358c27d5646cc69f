// Linked into swizzle-rt (and test servers) so they run on hosts with glibc 2.35, e.g.
// Ubuntu 22.04 on the GPU machines.
//
// With -static-libstdc++, GCC 12's libstdc++.a brings std::random_device (random.o,
// pulled in by std::runtime_error's string support even if nothing uses random_device),
// which calls arc4random, new in glibc 2.36: the binary would then need GLIBC_2.36 at
// load time. Defining arc4random here satisfies that reference inside the executable, so
// no versioned import of it remains. It returns 32 bits from getrandom(2) (Linux >= 3.17,
// glibc >= 2.25), as glibc's own arc4random does (glibc 2.36 manual, "Unpredictable Bytes").
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" uint32_t arc4random(void) {
  uint32_t v = 0;
  for (;;) {
    ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == static_cast<ssize_t>(sizeof v)) return v;
    if (n < 0 && errno != EINTR) std::abort();  // no entropy source at all: nothing sane to return
  }
}
