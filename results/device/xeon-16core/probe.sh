# fio vs tierkv vs a minimal pread loop: 4 KiB uniform random page-cache reads, 1 thread.
# Run from a folder whose .dev/ held the static fio, a stripped release tierkv and preadloop
# (gcc -O2 -static -o .dev/preadloop preadloop.c).
export PATH=$PWD/.dev:$PATH
mkdir -p /tmp/lab; F=/tmp/lab/probe.dat; dd if=/dev/urandom of=$F bs=1M count=1024 status=none; cat $F > /dev/null
tierkv bench device --path $F --methods syscall --ops read --patterns rand --sizes 4k --threads 1 --cache warm --file-size 1g --duration 3 --quiet | tail -1
FIO="fio --name=t --filename=$F --allow_file_create=0 --direct=0 --rw=randread --bs=4096 --numjobs=1 --thread --size=1073741824 --time_based=1 --runtime=3000ms --norandommap=1 --randrepeat=0 --invalidate=0 --fadvise_hint=0 --scramble_buffers=0 --mem_align=4096 --gtod_reduce=1 --output-format=json"
fiosum() { python3 -c "import json,sys;j=json.load(sys.stdin)['jobs'][0];print('fio $1: %.1f MB/s usr %.1f%% sys %.1f%%'%(j['read']['bw_bytes']/1e6,j['usr_cpu'],j['sys_cpu']))"; }
for r in 1 2 3; do
  preadloop $F 3
  $FIO --ioengine=psync | fiosum psync
  $FIO --ioengine=psync --clocksource=cpu | fiosum psync-clocksource-cpu
  $FIO --ioengine=pvsync2 | fiosum pvsync2
  tierkv bench device --path $F --methods syscall --ops read --patterns rand --sizes 4k --threads 1 --cache warm --file-size 1g --duration 3 --quiet | grep '^syscall'
done
