import { describe, expect, it } from 'vitest';
import { isPublicAddress } from '../src/modules/archive/public-address.js';

/**
 * The media downloader's address policy, by itself: what a DNS answer may be for Herald to connect.
 * Both families, and every IPv6 form that carries an IPv4 address.
 */
const PUBLIC = [
  '8.8.8.8',
  '1.1.1.1',
  '162.159.130.233', // Discord's CDN (Cloudflare)
  '9.255.255.255',
  '11.0.0.1',
  '100.63.255.255', // just below 100.64/10
  '100.128.0.0', // just above it
  '172.15.255.255', // just below 172.16/12
  '172.32.0.0', // just above it
  '192.167.255.255',
  '198.17.255.255', // just below 198.18/15
  '198.20.0.0', // just above it
  '223.255.255.255', // the last unicast address before multicast
  '2606:4700::1111',
  '2001:4860:4860::8888',
  '2a00:1450:4001:80b::200e',
  '::ffff:8.8.8.8', // IPv4-mapped, a public IPv4 inside
  '::ffff:0808:0808',
  '64:ff9b::808:808', // NAT64 of 8.8.8.8
  '2002:808:808::1', // 6to4 of 8.8.8.8
] as const;

const NOT_PUBLIC = [
  // IPv4
  '0.0.0.0', // unspecified
  '0.1.2.3', // 0.0.0.0/8
  '10.0.0.1',
  '10.255.255.255',
  '100.64.0.1', // 100.64/10 (CGNAT)
  '100.127.255.255',
  '127.0.0.1',
  '127.255.255.254',
  '169.254.169.254', // cloud metadata
  '172.16.0.1',
  '172.31.255.255',
  '192.0.0.8', // IETF protocol assignments
  '192.0.2.1', // documentation
  '192.168.0.1',
  '192.168.255.255',
  '198.18.0.1', // 198.18/15 (benchmarking)
  '198.19.255.255',
  '198.51.100.7', // documentation
  '203.0.113.9', // documentation
  '224.0.0.1', // multicast
  '239.255.255.250',
  '240.0.0.1', // 240/4 (reserved)
  '255.255.255.255', // broadcast
  // IPv6
  '::', // unspecified
  '::1', // loopback
  '::ffff:127.0.0.1', // IPv4-mapped loopback
  '::ffff:7f00:1',
  '::ffff:10.0.0.1',
  '::ffff:169.254.169.254',
  '::ffff:0.0.0.0',
  '::7f00:1', // IPv4-compatible loopback (deprecated form)
  '::127.0.0.1',
  '::808:808', // IPv4-compatible, even of a public address: not a form the internet routes
  '2002:7f00:1::', // 6to4 of 127.0.0.1
  '2002:a00:1::1', // 6to4 of 10.0.0.1
  '2002:a9fe:a9fe::', // 6to4 of 169.254.169.254
  '64:ff9b::7f00:1', // NAT64 of 127.0.0.1
  '64:ff9b::a00:1', // NAT64 of 10.0.0.1
  '64:ff9b::169.254.169.254',
  '64:ff9b:1::808:808', // local-use NAT64 (RFC 8215)
  'fec0::1', // site-local (fec0::/10)
  'feff::1',
  'fc00::1', // unique local (fc00::/7)
  'fd12:3456:789a::1',
  'fe80::1', // link-local (fe80::/10)
  'febf:ffff::1',
  'fe80::1%eth0', // with a zone
  'ff02::1', // multicast
  'ff05::1:3',
  '100::1', // discard-only
  '2001::1', // Teredo (2001::/32)
  '2001:0:4136:e378:8000:63bf:3fff:fdd2',
  '2001:2::1', // benchmarking
  '2001:db8::1', // documentation
  '3fff::1', // documentation (RFC 9637)
  '4000::1', // outside global unicast 2000::/3
  // Not addresses at all
  '',
  'localhost',
  'cdn.discordapp.com',
  '0x7f000001',
  '2130706433',
  '127.1',
  '[::1]',
] as const;

describe('the downloader connects only to public addresses', () => {
  it.each(PUBLIC)('%s is public', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
  it.each(NOT_PUBLIC)('%s is not public', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });
});
