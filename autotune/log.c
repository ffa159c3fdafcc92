/* log.c — tuning records, one JSON object per line:
 *
 *   {"v":2,"kiln":"0.1.0","target":"x86_64-... -mcpu=... -mattr=...",
 *    "key":"<workload key>","trace":[...primitives...],"seconds":1.2e-05,
 *    "status":"ok","default":false,"cache":"cold","time":"2025-01-01T12:00:00Z"}
 *
 * "cache" says how the time was taken: "warm" (repeated runs, the default;
 * also every record written before the field existed) or "cold" (each run
 * in the cache state of a model, --cache cold) or "model" (the kernel's median
 * time inside the whole model, written by `kiln tune`'s model check for each
 * schedule of a key it ran: the default, the best alone, two runners-up;
 * kn_at_log_best takes the fastest of those). "confirm":true (absent:
 * false) marks a record of a session's last phase, which times each task's
 * best and default again in turns; those decide the task's best
 * (kn_at_log_best).
 *
 * Files merge with `cat`. Loading keeps the records of one target; a line
 * that is not such an object (bad JSON, a missing field, a trace that does
 * not parse, another format version) is skipped with one warning naming the
 * file and line. Traces are stored re-serialized in canonical form, so a
 * candidate is "already measured" exactly when its canonical text matches.
 *
 * Version 1 differs in keys only (workload.c): a short one is read with its
 * batch dims' "N*" dropped, which is its version-2 key; a hashed one is
 * marked old_key until kn_at_log_adopt names it by a kernel's keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autotune/autotune.h"
#include "autotune/json.h"

static const char *const status_names[KN_AT_STATUS_COUNT] = {"ok", "wrong", "crash", "timeout", "invalid", "noisy"};

const char *kn_at_status_name(kn_at_status s) { return s >= 0 && s < KN_AT_STATUS_COUNT ? status_names[s] : "?"; }

void kn_at_log_add(kn_at_log *log, const kn_at_record *r) {
  if (log->n == log->cap) {
    int cap = log->cap ? 2 * log->cap : 64;
    kn_at_record *grown = KN_NEW_ARRAY(&log->arena, kn_at_record, cap);
    if (log->n) memcpy(grown, log->records, sizeof(kn_at_record) * (size_t)log->n);
    log->records = grown;
    log->cap = cap;
  }
  kn_at_record *c = &log->records[log->n++];
  *c = *r;
  c->target = kn_arena_strdup(&log->arena, r->target);
  c->key = kn_arena_strdup(&log->arena, r->key);
  c->trace = kn_arena_strdup(&log->arena, r->trace);
}

const char *kn_at_key_from_v1(const char *key, kn_arena *A, bool *old) {
  *old = strchr(key, '#') != NULL;
  if (*old || !strstr(key, "N*")) return key;
  char *out = kn_arena_alloc(A, strlen(key) + 1), *o = out;
  for (const char *p = key; *p; p++) {
    if (p[0] == 'N' && p[1] == '*' && (p == key || p[-1] == '[' || p[-1] == ',')) {
      p++;
      continue;
    }
    *o++ = *p;
  }
  *o = 0;
  return out;
}

int kn_at_log_adopt(kn_at_log *log, const char *key_v1, const char *key) {
  int n = 0;
  for (int i = 0; i < log->n && log->old_keys; i++) {
    kn_at_record *r = &log->records[i];
    if (!r->old_key || strcmp(r->key, key_v1)) continue;
    /* the same text in both versions (no batch dim) is settled too, so
     * old_keys counts only what no kernel has named yet */
    if (strcmp(key_v1, key)) r->key = kn_arena_strdup(&log->arena, key);
    r->old_key = false;
    log->old_keys--;
    n++;
  }
  return n;
}

const char *kn_at_log_key(kn_at_log *log, const kn_graph *g, const kn_group *grp, kn_arena *A) {
  const char *key = kn_at_workload_key(g, grp, A);
  if (log && log->old_keys) { /* the version-1 text is longer: hashed, it may be so where this one is not */
    const char *v1 = kn_at_workload_key_v1(g, grp, A);
    if (strchr(v1, '#')) kn_at_log_adopt(log, v1, key);
  }
  return key;
}

/* One line -> record; NULL return with `why` on a bad line. */
static bool parse_line(const char *line, kn_arena *scratch, kn_at_record *r, const char **kiln, char *why,
                       size_t cap) {
  char err[128];
  kn_json *j = kn_json_parse(line, scratch, err, sizeof err);
  if (!j) return snprintf(why, cap, "not JSON (%s)", err), false;
  if (j->kind != KN_JSON_OBJ) return snprintf(why, cap, "not a JSON object"), false;
  int64_t v;
  if (!kn_json_int(kn_json_get(j, "v"), &v)) return snprintf(why, cap, "no format version \"v\""), false;
  if (v < 1 || v > KN_AT_FORMAT_VERSION)
    return snprintf(why, cap, "format version %lld, this kiln reads 1 to %d", (long long)v, KN_AT_FORMAT_VERSION),
           false;
  const kn_json *target = kn_json_get(j, "target"), *key = kn_json_get(j, "key"), *status = kn_json_get(j, "status"),
                *seconds = kn_json_get(j, "seconds"), *dflt = kn_json_get(j, "default"),
                *cache = kn_json_get(j, "cache"), *confirm = kn_json_get(j, "confirm"),
                *noisy = kn_json_get(j, "noisy");
  if (!target || target->kind != KN_JSON_STR) return snprintf(why, cap, "no \"target\" string"), false;
  if (!key || key->kind != KN_JSON_STR || !*key->str) return snprintf(why, cap, "no \"key\" string"), false;
  if (!status || status->kind != KN_JSON_STR) return snprintf(why, cap, "no \"status\" string"), false;
  if (cache && (cache->kind != KN_JSON_STR ||
                (strcmp(cache->str, "cold") && strcmp(cache->str, "warm") && strcmp(cache->str, "model"))))
    return snprintf(why, cap, "\"cache\" is none of \"cold\", \"warm\", \"model\""), false;
  r->warm = !cache || !strcmp(cache->str, "warm");
  r->in_model = cache && !strcmp(cache->str, "model");
  r->status = KN_AT_STATUS_COUNT;
  for (int i = 0; i < KN_AT_STATUS_COUNT; i++)
    if (!strcmp(status->str, status_names[i])) r->status = (kn_at_status)i;
  if (r->status == KN_AT_STATUS_COUNT) return snprintf(why, cap, "unknown status '%s'", status->str), false;
  r->seconds = seconds && seconds->kind == KN_JSON_NUM ? seconds->num : -1;
  if (r->status == KN_AT_OK && !(r->seconds > 0)) return snprintf(why, cap, "status ok without positive \"seconds\""), false;
  kn_schedule s;
  kn_diag d;
  kn_diag_init(&d);
  bool ok = kn_at_trace_from_json(kn_json_get(j, "trace"), &s, &d) == 0;
  if (!ok) snprintf(why, cap, "%s", d.count ? d.lines[0] : "bad trace");
  kn_diag_free(&d);
  if (!ok) return false;
  char *trace = kn_arena_alloc(scratch, 4096);
  kn_at_trace_write(&s, trace, 4096);
  r->target = target->str;
  r->old_key = false;
  r->key = v == 1 ? kn_at_key_from_v1(key->str, scratch, &r->old_key) : key->str;
  r->trace = trace;
  r->is_default = dflt && dflt->kind == KN_JSON_BOOL && dflt->num != 0;
  r->confirm = confirm && confirm->kind == KN_JSON_BOOL && confirm->num != 0;
  r->noisy = noisy && noisy->kind == KN_JSON_BOOL && noisy->num != 0;
  const kn_json *version = kn_json_get(j, "kiln");
  *kiln = version && version->kind == KN_JSON_STR ? version->str : NULL;
  return true;
}

int kn_at_log_load(const char *path, const char *target, bool missing_ok, FILE *warn, kn_at_log *log, kn_diag *d) {
  memset(log, 0, sizeof *log);
  kn_arena_init(&log->arena);
  FILE *f = fopen(path, "r");
  if (!f) {
    if (missing_ok) return 0;
    return kn_diag_error(d, "tuning log '%s': cannot open it", path);
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  long lineno = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    bool blank = true;
    for (ssize_t i = 0; i < len && blank; i++) blank = line[i] == ' ' || line[i] == '\t';
    if (blank) continue;
    kn_arena scratch;
    kn_arena_init(&scratch);
    kn_at_record r;
    const char *kiln = NULL;
    char why[256];
    if ((size_t)len != strlen(line)) {
      snprintf(why, sizeof why, "NUL byte in the line");
    } else if (parse_line(line, &scratch, &r, &kiln, why, sizeof why)) {
      if (!strcmp(r.target, target)) {
        kn_at_log_add(log, &r);
        log->old_keys += r.old_key;
        if (kiln && strcmp(kiln, KILN_VERSION) && !log->other_kiln++)
          snprintf(log->other_kiln_version, sizeof log->other_kiln_version, "%s", kiln);
      }
      else
        log->other_target++;
      kn_arena_free(&scratch);
      continue;
    }
    kn_arena_free(&scratch);
    log->bad_lines++;
    if (warn) fprintf(warn, "kiln: warning: %s:%ld: skipped a bad tuning record: %s\n", path, lineno, why);
  }
  free(line);
  fclose(f);
  return 0;
}

void kn_at_log_free(kn_at_log *log) {
  kn_arena_free(&log->arena);
  memset(log, 0, sizeof *log);
}

/* The fastest OK record of key timed warm / cold, among confirm records or
 * the others; NULL if none. `*traces`: whether two traces have such records. */
static const kn_at_record *fastest(const kn_at_log *log, const char *key, bool warm, bool confirm, bool *traces) {
  const kn_at_record *best = NULL, *first = NULL;
  *traces = false;
  for (int i = 0; i < log->n; i++) {
    const kn_at_record *r = &log->records[i];
    if (r->status != KN_AT_OK || r->in_model || r->warm != warm || r->confirm != confirm || strcmp(r->key, key))
      continue;
    if (!first) first = r;
    else if (strcmp(r->trace, first->trace)) *traces = true;
    if (!best || r->seconds < best->seconds) best = r;
  }
  return best;
}

const kn_at_record *kn_at_log_best(const kn_at_log *log, const char *key) {
  const kn_at_record *best = NULL, *first = NULL;
  bool two = false;
  for (int i = 0; i < log->n; i++) {
    const kn_at_record *r = &log->records[i];
    if (r->status != KN_AT_OK || !r->in_model || strcmp(r->key, key)) continue;
    if (!first) first = r;
    else if (strcmp(r->trace, first->trace)) two = true;
    if (!best || r->seconds < best->seconds) best = r;
  }
  return two ? best : kn_at_log_best_alone(log, key);
}

const kn_at_record *kn_at_log_best_alone(const kn_at_log *log, const char *key) {
  for (int warm = 0; warm < 2; warm++) {
    bool two = false, unused;
    const kn_at_record *c = fastest(log, key, warm, true, &two);
    if (c && two) return c; /* a confirm round compared two schedules */
    const kn_at_record *best = fastest(log, key, warm, false, &unused);
    if (best) return best;
  }
  return NULL;
}

#define MAX_RANK 8

const kn_at_record *kn_at_log_ranked_alone(const kn_at_log *log, const char *key, int rank) {
  const kn_at_record *picked[MAX_RANK + 1];
  picked[0] = kn_at_log_best_alone(log, key);
  if (!picked[0] || rank <= 0) return picked[0];
  if (rank > MAX_RANK) return NULL;
  for (int k = 1; k <= rank; k++) {
    picked[k] = NULL;
    for (int i = 0; i < log->n; i++) {
      const kn_at_record *r = &log->records[i];
      if (r->status != KN_AT_OK || r->in_model || r->confirm || r->warm != picked[0]->warm || strcmp(r->key, key))
        continue;
      bool taken = false;
      for (int j = 0; j < k && !taken; j++) taken = !strcmp(picked[j]->trace, r->trace);
      if (!taken && (!picked[k] || r->seconds < picked[k]->seconds)) picked[k] = r;
    }
    if (!picked[k]) return NULL;
  }
  return picked[rank];
}

bool kn_at_log_has(const kn_at_log *log, const char *key, const char *trace) {
  for (int i = 0; i < log->n; i++)
    if (log->records[i].status != KN_AT_NOISY && !strcmp(log->records[i].trace, trace) &&
        !strcmp(log->records[i].key, key))
      return true;
  return false;
}

int kn_at_log_append(FILE *f, const kn_at_record *r, kn_diag *d) {
  size_t cap = strlen(r->target) * 6 + strlen(r->key) * 6 + strlen(r->trace) + 512, n = 0;
  char *buf = malloc(cap);
  KN_ASSERT(buf, "out of memory");
  n = (size_t)snprintf(buf, cap, "{\"v\":%d,\"kiln\":", KN_AT_FORMAT_VERSION);
  kn_json_escape(KILN_VERSION, buf, cap, &n);
  n += (size_t)snprintf(buf + n, cap - n, ",\"target\":");
  kn_json_escape(r->target, buf, cap, &n);
  n += (size_t)snprintf(buf + n, cap - n, ",\"key\":");
  kn_json_escape(r->key, buf, cap, &n);
  char stamp[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  n += (size_t)snprintf(buf + n, cap - n,
                        ",\"trace\":%s,\"seconds\":%.6g,\"status\":\"%s\",\"default\":%s,\"cache\":\"%s\"%s%s,\"time\":\"%s\"}\n",
                        r->trace, r->status == KN_AT_OK || r->status == KN_AT_NOISY ? r->seconds : -1.0, kn_at_status_name(r->status),
                        r->is_default ? "true" : "false", r->in_model ? "model" : r->warm ? "warm" : "cold",
                        r->confirm ? ",\"confirm\":true" : "", r->noisy ? ",\"noisy\":true" : "", stamp);
  KN_ASSERT(n < cap, "record buffer too small");
  int rc = fputs(buf, f) < 0 || fflush(f) != 0 ? kn_diag_error(d, "tuning log: write failed") : 0;
  free(buf);
  return rc;
}
