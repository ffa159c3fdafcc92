/* log_upgrade.c — `kiln tune --upgrade-log`: a log's records of format
 * version 1 rewritten in the current version, in place.
 *
 * Only keys changed between the versions (workload.c): a short key loses
 * its batch dims' "N*"; a hashed key is renamed when a kernel of the model
 * has it as its version-1 key, and is otherwise left as it was (still
 * read, and adopted by a model that has it). Everything else of a line is
 * kept byte for byte, and so is every line that is not such a record. The
 * file is replaced by a rename, so an interrupted upgrade leaves the old
 * log whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autotune/autotune.h"
#include "autotune/json.h"

/* The line with its version and key rewritten into out (malloc'd), or
 * NULL when it stays as it is. */
static char *upgrade_line(const char *line, const char *const *keys_v1, const char *const *keys, int n,
                          kn_at_upgrade_counts *c) {
  kn_arena A;
  kn_arena_init(&A);
  char err[64], *out = NULL;
  const kn_json *j = kn_json_parse(line, &A, err, sizeof err), *key = j ? kn_json_get(j, "key") : NULL;
  int64_t v = 0;
  if (!j || !kn_json_int(kn_json_get(j, "v"), &v) || v != 1 || !key || key->kind != KN_JSON_STR ||
      strncmp(line, "{\"v\":1,", 7)) {
    if (v == KN_AT_FORMAT_VERSION) c->current++;
    else c->other++;
    goto done;
  }
  bool hashed;
  const char *now = kn_at_key_from_v1(key->str, &A, &hashed);
  if (hashed) {
    now = NULL;
    for (int i = 0; i < n && !now; i++)
      if (!strcmp(keys_v1[i], key->str)) now = keys[i];
    if (!now) {
      c->left++;
      goto done;
    }
  }
  /* a JSON string literal takes at most 6 bytes a character, quotes and NUL */
  size_t cap_old = 6 * strlen(key->str) + 3, cap_new = 6 * strlen(now) + 3, len_old = 0, len_new = 0;
  char *old_text = kn_arena_alloc(&A, cap_old), *new_text = kn_arena_alloc(&A, cap_new);
  kn_json_escape(key->str, old_text, cap_old, &len_old);
  kn_json_escape(now, new_text, cap_new, &len_new);
  const char *at = strstr(line, "\"key\":");
  if (!at || strncmp(at + 6, old_text, len_old)) { /* not as kiln writes it: leave it */
    c->left++;
    goto done;
  }
  size_t head = (size_t)(at + 6 - line), tail = strlen(at + 6 + len_old);
  out = malloc(head + len_new + tail + 1);
  KN_ASSERT(out, "out of memory");
  memcpy(out, line, head);
  out[5] = '0' + KN_AT_FORMAT_VERSION; /* {"v":1, -> {"v":2, */
  memcpy(out + head, new_text, len_new);
  memcpy(out + head + len_new, at + 6 + len_old, tail + 1);
  c->upgraded++;
  c->renamed += hashed;
done:
  kn_arena_free(&A);
  return out;
}

int kn_at_log_upgrade(const char *path, const char *const *keys_v1, const char *const *keys, int n,
                      kn_at_upgrade_counts *c, kn_diag *d) {
  _Static_assert(KN_AT_FORMAT_VERSION == 2, "upgrade_line writes version 2 over version 1");
  *c = (kn_at_upgrade_counts){0};
  FILE *f = fopen(path, "r");
  if (!f) return kn_diag_error(d, "tuning log '%s': cannot open it", path);
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.upgrade.XXXXXX", path) >= (int)sizeof tmp) {
    fclose(f);
    return kn_diag_error(d, "tuning log '%s': path too long", path);
  }
  int fd = mkstemp(tmp);
  struct stat st;
  if (fd >= 0 && fstat(fileno(f), &st) == 0) fchmod(fd, st.st_mode & 07777); /* the log's own mode, not 0600 */
  FILE *o = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!o) {
    if (fd >= 0) close(fd), unlink(tmp);
    fclose(f);
    return kn_diag_error(d, "tuning log '%s': cannot create a file beside it to write the upgrade to", path);
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  bool ok = true;
  while (ok && (len = getline(&line, &cap, f)) >= 0) {
    bool nl = len > 0 && line[len - 1] == '\n';
    if (nl) line[len - 1] = 0;
    char *up = (size_t)len == strlen(line) + nl ? upgrade_line(line, keys_v1, keys, n, c) : NULL;
    ok = fputs(up ? up : line, o) >= 0 && (!nl || fputc('\n', o) != EOF);
    free(up);
  }
  free(line);
  ok = ok && !ferror(f);
  fclose(f);
  ok = fflush(o) == 0 && fsync(fileno(o)) == 0 && ok;
  ok = fclose(o) == 0 && ok;
  if (ok && c->upgraded == 0) {
    unlink(tmp); /* nothing to change: the log stays the very file it was */
    return 0;
  }
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return kn_diag_error(d, "tuning log '%s': cannot write the upgraded log; it is unchanged", path);
  }
  return 0;
}
