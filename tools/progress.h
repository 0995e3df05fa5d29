/*
 * Training progress: on a terminal a bar redrawn in place (step, loss,
 * accuracy, images/s, time left); elsewhere nothing until the caller prints
 * its one line per epoch.
 */
#ifndef CUTTLE_TOOLS_PROGRESS_H
#define CUTTLE_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct progress {
    FILE *out;
    bool terminal;
    long epoch, epochs;
    int64_t steps;
    double start, last_draw;
} progress;

void progress_start(progress *p, FILE *out, long epoch, long epochs, int64_t steps);
/* After `done` steps; loss and accuracy are the epoch's running means. */
void progress_update(progress *p, int64_t done, double loss, double accuracy,
                     double images_per_second);
/* Clear the bar so the epoch's line can take its place. */
void progress_end(progress *p);

#endif
