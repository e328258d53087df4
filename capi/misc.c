// libibverbs functions that need no device, and the answers of what the
// drop-in does not implement.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "capi.h"

// Rates: each enum ibv_rate with its speed in Mb/s (enum values from
// verbs.h). The multiples of 2.5 Gb/s among them are what
// ibv_rate_to_mult and mult_to_ibv_rate convert.
static const struct { int rate, mbps; } rates[] = {
	{IBV_RATE_2_5_GBPS, 2500}, {IBV_RATE_5_GBPS, 5000}, {IBV_RATE_10_GBPS, 10000},
	{IBV_RATE_20_GBPS, 20000}, {IBV_RATE_30_GBPS, 30000}, {IBV_RATE_40_GBPS, 40000},
	{IBV_RATE_60_GBPS, 60000}, {IBV_RATE_80_GBPS, 80000}, {IBV_RATE_120_GBPS, 120000},
	{IBV_RATE_14_GBPS, 14062}, {IBV_RATE_56_GBPS, 56250}, {IBV_RATE_112_GBPS, 112500},
	{IBV_RATE_168_GBPS, 168750}, {IBV_RATE_25_GBPS, 25781}, {IBV_RATE_100_GBPS, 103125},
	{IBV_RATE_200_GBPS, 206250}, {IBV_RATE_300_GBPS, 309375}, {IBV_RATE_28_GBPS, 28125},
	{IBV_RATE_50_GBPS, 53125}, {IBV_RATE_400_GBPS, 425000}, {IBV_RATE_600_GBPS, 637500},
	{IBV_RATE_800_GBPS, 850000}, {IBV_RATE_1200_GBPS, 1275000},
};
#define NRATES (sizeof rates / sizeof rates[0])
#define NMULT 9 /* the first NMULT are 2.5 Gb/s multiples */

int rgo_ibv_rate_to_mult(enum ibv_rate rate) {
	for (unsigned i = 0; i < NMULT; i++)
		if (rates[i].rate == (int)rate)
			return rates[i].mbps / 2500;
	return -1;
}

enum ibv_rate rgo_mult_to_ibv_rate(int mult) {
	for (unsigned i = 0; i < NMULT; i++)
		if (rates[i].mbps / 2500 == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

int rgo_ibv_rate_to_mbps(enum ibv_rate rate) {
	for (unsigned i = 0; i < NRATES; i++)
		if (rates[i].rate == (int)rate)
			return rates[i].mbps;
	return -1;
}

enum ibv_rate rgo_mbps_to_ibv_rate(int mbps) {
	for (unsigned i = 0; i < NRATES; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

int rgo_ibv_get_sysfs_path(char *buf, size_t size) {
	int n = snprintf(buf, size, "/sys");
	return n < (int)size ? 0 : -1;
}

// rgo_ibv_read_sysfs_file reads dir/file into buf without its final
// newline: its length, or -1 (soft devices have no sysfs files).
int rgo_ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size) {
	char path[512];
	if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size);
	close(fd);
	if (n <= 0)
		return -1;
	if ((size_t)n == size)
		n--;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return (int)n;
}

// Fork: the soft device's memory is the process's own, not a NIC's DMA
// target, so fork needs no setup (IBV_FORK_UNNEEDED); a child process must
// not use verbs objects it inherited (see the README).
int rgo_ibv_fork_init(void) { return 0; }
enum ibv_fork_status rgo_ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int rgo_ibv_dontfork_range(void *base, size_t size) { return 0; }
int rgo_ibv_dofork_range(void *base, size_t size) { return 0; }

// What the drop-in does not implement answers in the verb's own way:
// NULL or -1 with errno set, or the errno value itself.
void *rgo_unsupported_null(void) { errno = EOPNOTSUPP; return NULL; }
int rgo_unsupported_neg(void) { errno = EOPNOTSUPP; return -1; }
int rgo_unsupported_errno(void) { errno = EOPNOTSUPP; return EOPNOTSUPP; }
int rgo_unsupported_negerrno(void) { return -EOPNOTSUPP; }
void rgo_unsupported_void(void) {}
int rgo_unsupported_zero(void) { return 0; }
// rsockets (rsocket, rsend, rpoll, ...): not provided.
int rgo_unsupported_enosys(void) { errno = ENOSYS; return -1; }
