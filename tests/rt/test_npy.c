/* test_npy.c — .npy round trips for every dtype and several ranks, files
 * written by NumPy itself (formats 1.0 / 2.0 / 3.0, when python3 + numpy are
 * available), must-fail files with their diagnostics, and random corruption
 * of a valid file (never a crash; run under ASan in the sanitizer build). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/npy.h"

static char dir[64];

static int sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/kiln-npy-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return sh("rm -rf '%s'", dir);
}

static bool have_numpy(void) {
  static int cached = -1;
  if (cached < 0) cached = sh("python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return cached;
}

static void test_round_trip(void **state) {
  (void)state;
  static const kn_dtype types[] = {KN_DT_F32, KN_DT_F64, KN_DT_F16, KN_DT_I64, KN_DT_I32, KN_DT_I16,
                                   KN_DT_I8,  KN_DT_U8,  KN_DT_U16, KN_DT_U32, KN_DT_U64, KN_DT_BOOL};
  static const int64_t shapes[][3] = {{0, 0, 0}, {5, 0, 0}, {2, 3, 4}, {0, 3, 0}};
  static const int ranks[] = {0, 1, 3, 2};
  unsigned char data[24 * 8];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 37 + 1) & 1 ? (unsigned char)(i * 7) : 1;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (int s = 0; s < 4; s++) {
      kn_dtype dt = types[t];
      if (dt == KN_DT_BOOL)
        for (size_t i = 0; i < sizeof data; i++) data[i] &= 1;
      char path[128];
      snprintf(path, sizeof path, "%s/%s_%d.npy", dir, kn_dtype_name(dt), s);
      kn_diag d;
      kn_diag_init(&d);
      assert_int_equal(kn_npy_write(path, dt, ranks[s], shapes[s], data, &d), 0);
      kn_npy v;
      assert_int_equal(kn_npy_read(path, &v, &d), 0);
      assert_int_equal(v.dtype, dt);
      assert_int_equal(v.rank, ranks[s]);
      int64_t numel = 1;
      for (int r = 0; r < ranks[s]; r++) {
        assert_int_equal(v.dims[r], shapes[s][r]);
        numel *= shapes[s][r];
      }
      assert_int_equal(v.numel, numel);
      if (numel > 0) assert_memory_equal(v.data, data, (size_t)numel * kn_dtype_size(dt));
      kn_npy_free(&v);
      kn_diag_free(&d);
      if (have_numpy() && s == 2)
        assert_int_equal(sh("python3 -c \"import numpy as np, sys; a = np.load('%s'); "
                            "sys.exit(0 if a.shape == (2, 3, 4) and a.dtype.itemsize == %zu else 1)\"",
                            path, kn_dtype_size(dt)),
                         0);
    }
  /* the data is 64-byte aligned in the file, as NumPy does it */
  assert_int_equal(sh("test $(( ($(stat -c %%s %s/float32_1.npy) - 20) %% 64 )) -eq 0", dir), 0);
}

/* Outputs are created 0666 less the umask, like any file a program writes
 * (not mkstemp's 0600), and nothing is left beside them. */
static void test_mode_follows_umask(void **state) {
  (void)state;
  static const mode_t masks[] = {027, 022, 077};
  for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++) {
    char path[128];
    snprintf(path, sizeof path, "%s/mode_%zu.npy", dir, m);
    const int64_t dims[] = {3};
    const float data[] = {1, 2, 3};
    kn_diag d;
    kn_diag_init(&d);
    mode_t old = umask(masks[m]);
    int rc = kn_npy_write(path, KN_DT_F32, 1, dims, data, &d);
    umask(old);
    assert_int_equal(rc, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~masks[m]);
    kn_diag_free(&d);
  }
  assert_int_equal(sh("test -z \"$(ls %s | grep tmp)\"", dir), 0);
}

static void test_numpy_files(void **state) {
  (void)state;
  if (!have_numpy()) {
    printf("  numpy not available: skipped\n");
    return;
  }
  assert_int_equal(sh("cd '%s' && python3 -c \"\n"
                      "import numpy as np\n"
                      "from numpy.lib import format as f\n"
                      "a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5\n"
                      "for v in [(1, 0), (2, 0), (3, 0)]:\n"
                      "    with open('v%%d.npy' %% v[0], 'wb') as fp: f.write_array(fp, a, version=v)\n"
                      "np.save('fortran.npy', np.asfortranarray(a))\n"
                      "np.save('big.npy', a.astype('>f4'))\n"
                      "np.save('complex.npy', a.astype(np.complex64))\n"
                      "np.save('struct.npy', np.zeros(3, dtype=[('x', '<f4'), ('y', '<i4')]))\n"
                      "np.save('bool.npy', a > 3)\n"
                      "np.save('i8.npy', np.arange(-3, 3, dtype=np.int8))\n"
                      "np.save('scalar.npy', np.float64(2.5))\n"
                      "\"",
                      dir),
                   0);
  kn_diag d;
  kn_diag_init(&d);
  for (int v = 1; v <= 3; v++) {
    char path[128];
    snprintf(path, sizeof path, "%s/v%d.npy", dir, v);
    kn_npy n;
    assert_int_equal(kn_npy_read(path, &n, &d), 0);
    assert_int_equal(n.rank, 3);
    assert_int_equal(n.dims[2], 4);
    assert_float_equal(((float *)n.data)[23], 11.5f, 0);
    kn_npy_free(&n);
  }
  struct {
    const char *file, *needle;
  } bad[] = {
      {"fortran.npy", "Fortran"}, {"big.npy", "big-endian"}, {"complex.npy", "'<c8'"}, {"struct.npy", "structured"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, bad[i].file);
    kn_npy n;
    assert_int_equal(kn_npy_read(path, &n, &d), -1);
    assert_true(strstr(d.lines[d.count - 1], bad[i].needle) && strstr(d.lines[d.count - 1], bad[i].file));
    assert_null(n.data);
  }
  kn_npy n;
  char path[128];
  snprintf(path, sizeof path, "%s/bool.npy", dir);
  assert_int_equal(kn_npy_read(path, &n, &d), 0);
  assert_int_equal(n.dtype, KN_DT_BOOL);
  assert_int_equal(((unsigned char *)n.data)[23], 1);
  kn_npy_free(&n);
  snprintf(path, sizeof path, "%s/i8.npy", dir);
  assert_int_equal(kn_npy_read(path, &n, &d), 0);
  assert_int_equal(((int8_t *)n.data)[0], -3);
  kn_npy_free(&n);
  snprintf(path, sizeof path, "%s/scalar.npy", dir);
  assert_int_equal(kn_npy_read(path, &n, &d), 0);
  assert_int_equal(n.rank, 0);
  assert_int_equal(n.numel, 1);
  assert_float_equal(*(double *)n.data, 2.5, 0);
  kn_npy_free(&n);
  kn_diag_free(&d);
}

/* Builds "\x93NUMPY" v1.0 + header + `data_bytes` zero bytes. */
static size_t make_file(unsigned char *buf, const char *header, size_t data_bytes) {
  size_t h = strlen(header);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(h & 0xff);
  buf[9] = (unsigned char)(h >> 8);
  memcpy(buf + 10, header, h);
  memset(buf + 10 + h, 0, data_bytes);
  return 10 + h + data_bytes;
}

static void test_malformed(void **state) {
  (void)state;
  static unsigned char buf[4096];
  struct {
    const char *header;
    size_t data;
    const char *needle;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", 8, "truncated .npy data"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, -1), }\n", 64, "bad shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }\n", 64, "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", 64, "too large"},
      {"{'descr': '<f4', 'shape': (3,), }\n", 12, "lacks"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,), }\n", 12, "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}\n", 12, "'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", 12, "malformed"},
      {"['descr', '<f4']\n", 12, "no dict"},
      {"{'descr': '<f3', 'fortran_order': False, 'shape': (3,), }\n", 12, "'<f3'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 3, }\n", 12, "tuple"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (3,), }\n", 12, "malformed"},
  };
  kn_diag d;
  kn_diag_init(&d);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len = make_file(buf, cases[i].header, cases[i].data);
    kn_npy n;
    assert_int_equal(kn_npy_parse(buf, len, "bad.npy", &n, &d), -1);
    if (!strstr(d.lines[d.count - 1], cases[i].needle) || !strstr(d.lines[d.count - 1], "bad.npy")) {
      fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, d.lines[d.count - 1], cases[i].needle);
      fail();
    }
  }
  /* bad magic, short files, header longer than the file, unknown version */
  kn_npy n;
  assert_int_equal(kn_npy_parse("\x93NUMPX\x01\x00\x00\x00", 10, "m.npy", &n, &d), -1);
  assert_int_equal(kn_npy_parse("\x93NUMPY", 6, "m.npy", &n, &d), -1);
  assert_int_equal(kn_npy_parse("", 0, "m.npy", &n, &d), -1);
  assert_int_equal(kn_npy_parse("\x93NUMPY\x01\x00\xff\x00{", 11, "m.npy", &n, &d), -1);
  assert_true(strstr(d.lines[d.count - 1], "truncated .npy header"));
  assert_int_equal(kn_npy_parse("\x93NUMPY\x09\x00\x00\x00", 10, "m.npy", &n, &d), -1);
  assert_true(strstr(d.lines[d.count - 1], "version 9"));
  /* a missing file */
  char path[128];
  snprintf(path, sizeof path, "%s/nope.npy", dir);
  assert_int_equal(kn_npy_read(path, &n, &d), -1);
  assert_true(strstr(d.lines[d.count - 1], "nope.npy"));
  kn_diag_free(&d);
}

static void test_random_corruption(void **state) {
  (void)state;
  static unsigned char good[512], bad[512];
  size_t len = make_file(good, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }       \n", 24);
  uint32_t seed = 12345;
  int accepted = 0;
  for (int it = 0; it < 20000; it++) {
    memcpy(bad, good, len);
    int flips = 1 + it % 4;
    for (int f = 0; f < flips; f++) {
      seed = seed * 1103515245u + 12345u;
      size_t pos = (seed >> 8) % len;
      seed = seed * 1103515245u + 12345u;
      bad[pos] = (unsigned char)(seed >> 16);
    }
    seed = seed * 1103515245u + 12345u;
    size_t cut = it % 7 == 0 ? (seed >> 8) % (len + 1) : len;
    kn_diag d;
    kn_diag_init(&d);
    kn_npy n;
    if (kn_npy_parse(bad, cut, "fuzz.npy", &n, &d) == 0) {
      accepted++;
      kn_npy_free(&n);
    } else {
      assert_true(d.count >= 1);
    }
    kn_diag_free(&d);
  }
  assert_true(accepted > 0); /* flips in the data itself stay valid */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_mode_follows_umask),
      cmocka_unit_test(test_numpy_files),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_random_corruption),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
