/* file.h — read-only memory-mapped files and atomic output files.
 *
 *   assay_mapped_file f;
 *   if (assay_mapped_file_open(&f, "model.gguf") != ASSAY_OK) ...   // f.data, f.size
 *   assay_mapped_file_close(&f);
 *
 *   assay_output_file out;                       // writes "x.gguf.tmp-<pid>", renames on commit
 *   assay_output_file_open(&out, "x.gguf", 0);   // 0: refuse to overwrite an existing file
 *   fwrite(..., out.fp);
 *   assay_output_file_commit(&out);              // or assay_output_file_abort(&out) on error
 *   (path "-": standard output, written directly)
 *
 * Weights are mmapped (DESIGN.md principle 6); outputs never appear half-written under their real name.
 */
#ifndef ASSAY_FILE_H
#define ASSAY_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "assay/status.h"

typedef struct assay_mapped_file {
    const uint8_t *data;
    size_t size;
    char *path;
} assay_mapped_file;

assay_status assay_mapped_file_open(assay_mapped_file *f, const char *path);
void assay_mapped_file_close(assay_mapped_file *f);

/* Reads a whole (small) file into a NUL-terminated heap buffer. */
assay_status assay_read_file(const char *path, char **data, size_t *size);

typedef struct assay_output_file {
    FILE *fp;
    char *final_path;
    char *temp_path;
} assay_output_file;

/* "-" names standard output: assay_output_file_open writes there directly (no temporary file, nothing to rename). */
int assay_output_is_stdout(const char *path);

assay_status assay_output_file_open(assay_output_file *out, const char *path, int overwrite);
/* Flushes, fsyncs and renames into place; closes in every case. */
assay_status assay_output_file_commit(assay_output_file *out);
/* Closes and removes the temporary file. Safe to call after a failed open or a commit. */
void assay_output_file_abort(assay_output_file *out);

int assay_path_is_dir(const char *path);
int assay_path_exists(const char *path);
/* The shared data and models root: $ASSAY_SHARED when set, else the ../shared beside the source tree this
 * binary was configured from (when it exists), else NULL. Data defaults (task data, calibration text) hang off it. */
const char *assay_shared_dir(void);

/* "dir" + "/" + "name" in a new heap string. */
char *assay_path_join(const char *dir, const char *name);

#endif
