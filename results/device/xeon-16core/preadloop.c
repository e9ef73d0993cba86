// Minimal reference: uniform random 4 KiB preads from a warm file for N seconds, one thread.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int c,char**v){int fd=open(v[1],O_RDONLY);if(fd<0){perror("open");return 1;}
 off_t size=lseek(fd,0,SEEK_END);uint64_t blocks=size/4096;double secs=atof(v[2]);
 void*buf;posix_memalign(&buf,4096,4096);uint64_t x=88172645463325252ull,ops=0;
 double t0=now(),t=t0;while(t-t0<secs){for(int i=0;i<256;i++){x^=x<<13;x^=x>>7;x^=x<<17;
 if(pread(fd,buf,4096,(off_t)(x%blocks)*4096)!=4096){perror("pread");return 1;}ops++;}t=now();}
 struct rusage r;getrusage(RUSAGE_SELF,&r);
 printf("preadloop 4KiB rand: %.1f MB/s, user %.2fs sys %.2fs over %.2fs\n",ops*4096/(t-t0)/1e6,
 r.ru_utime.tv_sec+r.ru_utime.tv_usec/1e6,r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6,t-t0);return 0;}
