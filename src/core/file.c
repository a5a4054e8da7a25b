/* file.c — mmapped inputs and write-then-rename outputs (see include/assay/file.h). */
#define _POSIX_C_SOURCE 200809L
#include "assay/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assay/cleanup.h"

assay_status assay_mapped_file_open(assay_mapped_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return assay_fail(ASSAY_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return assay_fail(ASSAY_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return assay_fail(ASSAY_ERR_IO, "%s is a directory, expected a file", path);
    }
    f->size = (size_t)st.st_size;
    if (f->size > 0) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return assay_fail(ASSAY_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        }
        f->data = p;
    }
    close(fd);
    f->path = assay_xstrdup(path);
    return ASSAY_OK;
}

void assay_mapped_file_close(assay_mapped_file *f) {
    if (f->data && f->size) munmap((void *)f->data, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

assay_status assay_read_file(const char *path, char **data, size_t *size) {
    *data = NULL;
    if (size) *size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return assay_fail(ASSAY_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = assay_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = assay_xrealloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, fp);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        free(buf);
        return assay_fail(ASSAY_ERR_IO, "error reading %s", path);
    }
    buf[n] = 0;
    *data = buf;
    if (size) *size = n;
    return ASSAY_OK;
}

int assay_output_is_stdout(const char *path) { return path && strcmp(path, "-") == 0; }

assay_status assay_output_file_open(assay_output_file *out, const char *path, int overwrite) {
    memset(out, 0, sizeof *out);
    if (assay_output_is_stdout(path)) {
        /* "-": standard output, written in place (nothing to rename, nothing a failure could leave behind) */
        out->fp = stdout;
        out->final_path = assay_xstrdup("standard output");
        return ASSAY_OK;
    }
    if (!overwrite && assay_path_exists(path))
        return assay_fail(ASSAY_ERR_IO, "%s already exists (pass --force to overwrite)", path);
    size_t n = strlen(path) + 32;
    out->temp_path = assay_xmalloc(n);
    snprintf(out->temp_path, n, "%s.tmp-%ld", path, (long)getpid());
    out->fp = fopen(out->temp_path, "wb");
    if (!out->fp) {
        /* the message names the path the user gave: the temporary name is ours */
        assay_status st = assay_fail(ASSAY_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        free(out->temp_path);
        out->temp_path = NULL;
        return st;
    }
    out->final_path = assay_xstrdup(path);
    assay_cleanup_add(out->temp_path, out->final_path);
    return ASSAY_OK;
}

assay_status assay_output_file_commit(assay_output_file *out) {
    assay_status st = ASSAY_OK;
    if (!out->fp) return assay_fail(ASSAY_ERR_IO, "output file is not open");
    if (!out->temp_path) { /* standard output */
        if (fflush(out->fp) != 0 || ferror(out->fp)) st = assay_fail(ASSAY_ERR_IO, "error writing standard output: %s", strerror(errno));
        out->fp = NULL;
        free(out->final_path);
        out->final_path = NULL;
        return st;
    }
    if (fflush(out->fp) != 0 || ferror(out->fp) || fsync(fileno(out->fp)) != 0)
        st = assay_fail(ASSAY_ERR_IO, "error writing %s: %s", out->final_path, strerror(errno));
    if (fclose(out->fp) != 0 && st == ASSAY_OK)
        st = assay_fail(ASSAY_ERR_IO, "error writing %s: %s", out->final_path, strerror(errno));
    out->fp = NULL;
    if (st == ASSAY_OK && rename(out->temp_path, out->final_path) != 0)
        st = assay_fail(ASSAY_ERR_IO, "cannot put %s in place: %s", out->final_path, strerror(errno));
    if (st != ASSAY_OK) remove(out->temp_path);
    assay_cleanup_forget(out->temp_path);
    free(out->temp_path);
    free(out->final_path);
    out->temp_path = out->final_path = NULL;
    return st;
}

void assay_output_file_abort(assay_output_file *out) {
    if (out->fp && out->temp_path) fclose(out->fp);
    else if (out->fp) fflush(out->fp); /* standard output stays open: what was written is gone already */
    if (out->temp_path) remove(out->temp_path);
    assay_cleanup_forget(out->temp_path);
    free(out->temp_path);
    free(out->final_path);
    memset(out, 0, sizeof *out);
}

int assay_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int assay_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

const char *assay_shared_dir(void) {
    const char *env = getenv("ASSAY_SHARED");
    if (env && *env) return env;
#ifdef ASSAY_DEFAULT_SHARED_DIR
    if (assay_path_is_dir(ASSAY_DEFAULT_SHARED_DIR)) return ASSAY_DEFAULT_SHARED_DIR;
#endif
    return NULL;
}

char *assay_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = assay_xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}
