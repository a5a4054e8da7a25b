/* cleanup.c — the registry of temporary outputs (see include/assay/cleanup.h). */
#define _XOPEN_SOURCE 700
#include "assay/cleanup.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "assay/status.h"

typedef struct entry {
    char *temp, *final;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *entries;
static int n_entries, cap_entries;

void assay_cleanup_add(const char *temp_path, const char *final_path) {
    if (!temp_path) return;
    pthread_mutex_lock(&lock);
    if (n_entries == cap_entries) {
        cap_entries = cap_entries ? 2 * cap_entries : 8;
        entries = assay_xrealloc(entries, sizeof *entries * (size_t)cap_entries);
    }
    entries[n_entries].temp = assay_xstrdup(temp_path);
    entries[n_entries].final = final_path ? assay_xstrdup(final_path) : NULL;
    n_entries++;
    pthread_mutex_unlock(&lock);
}

void assay_cleanup_forget(const char *temp_path) {
    if (!temp_path) return;
    pthread_mutex_lock(&lock);
    for (int i = n_entries - 1; i >= 0; i--) {
        if (strcmp(entries[i].temp, temp_path) != 0) continue;
        free(entries[i].temp);
        free(entries[i].final);
        memmove(entries + i, entries + i + 1, sizeof *entries * (size_t)(n_entries - i - 1));
        n_entries--;
        break;
    }
    pthread_mutex_unlock(&lock);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0; /* keep going: remove what can be removed */
}

int assay_remove_tree(const char *path) {
    struct stat st;
    if (!path || lstat(path, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return remove(path);
    /* a worker thread may still be adding files while the tree goes: try again until it is gone */
    for (int attempt = 0; attempt < 5; attempt++) {
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        if (lstat(path, &st) != 0) return 0;
    }
    return -1;
}

int assay_cleanup_run(void) {
    pthread_mutex_lock(&lock);
    int removed = 0;
    for (int i = n_entries - 1; i >= 0; i--) {
        struct stat st;
        if (lstat(entries[i].temp, &st) == 0) {
            assay_remove_tree(entries[i].temp);
            removed++;
        }
        free(entries[i].temp);
        free(entries[i].final);
    }
    n_entries = 0;
    pthread_mutex_unlock(&lock);
    return removed;
}
