/* cleanup.h — temporary outputs that must not outlive an interrupted process.
 *
 * Every output is written under a temporary name and renamed into place when complete (file.h, quantize.h). The
 * writers register the temporary path here while it exists; when the process is interrupted (SIGINT, SIGTERM,
 * SIGHUP), the command line calls assay_cleanup_run() before exiting, so no "OUT.tmp-PID" is left behind.
 *
 *   assay_cleanup_add(temp_path, final_path);    // after creating temp_path
 *   ... write ...
 *   assay_cleanup_forget(temp_path);             // after renaming it into place or removing it
 *
 * Paths are copied. Directories are removed with everything in them. Thread-safe.
 */
#ifndef ASSAY_CLEANUP_H
#define ASSAY_CLEANUP_H

/* `final_path` is the name the user gave (for messages); may be NULL. */
void assay_cleanup_add(const char *temp_path, const char *final_path);
void assay_cleanup_forget(const char *temp_path);
/* Removes every registered path (the newest first) and forgets them; returns how many existed. Safe to call from a
 * thread that watches for signals while other threads keep working. */
int assay_cleanup_run(void);
/* Removes a file, or a directory and everything in it; 0 on success (or when nothing was there). */
int assay_remove_tree(const char *path);

#endif
