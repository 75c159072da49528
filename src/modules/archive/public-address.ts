import { isIP } from 'node:net';

/**
 * Which addresses the media downloader may connect to: globally reachable unicast only, so no URL
 * (and no DNS answer) can make Herald fetch from itself, its network or a cloud metadata service.
 *
 * Each family is judged on its own bytes. (Node's `BlockList` judges an IPv4 address against IPv6
 * rules as a mapped address too, so one `::ffff:0:0/96` rule refused every IPv4 address.) IPv6
 * forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by the IPv4 address they reach.
 */

type Range = readonly [bytes: readonly number[], prefix: number];

/** IPv4 ranges that are not globally reachable (RFC 6890 and its updates). */
const IPV4_NOT_PUBLIC: readonly Range[] = [
  [[0, 0, 0, 0], 8], // "this network"
  [[10, 0, 0, 0], 8], // private
  [[100, 64, 0, 0], 10], // shared address space (CGNAT)
  [[127, 0, 0, 0], 8], // loopback
  [[169, 254, 0, 0], 16], // link-local (cloud metadata services)
  [[172, 16, 0, 0], 12], // private
  [[192, 0, 0, 0], 24], // IETF protocol assignments
  [[192, 0, 2, 0], 24], // documentation
  [[192, 88, 99, 0], 24], // 6to4 relay anycast (deprecated)
  [[192, 168, 0, 0], 16], // private
  [[198, 18, 0, 0], 15], // benchmarking
  [[198, 51, 100, 0], 24], // documentation
  [[203, 0, 113, 0], 24], // documentation
  [[224, 0, 0, 0], 4], // multicast
  [[240, 0, 0, 0], 4], // reserved, and the limited broadcast 255.255.255.255
];

/** Global unicast: the only IPv6 space handed out on the internet. */
const IPV6_GLOBAL: Range = [[0x20], 3];
/** Inside global unicast, what is still not a public host. */
const IPV6_NOT_PUBLIC: readonly Range[] = [
  [[0x20, 0x01, 0x00, 0x00], 23], // IETF protocol assignments: Teredo, benchmarking, ORCHID, …
  [[0x20, 0x01, 0x0d, 0xb8], 32], // documentation
  [[0x3f, 0xff], 20], // documentation
];
/** IPv6 forms whose last 32 bits are an IPv4 address the connection reaches. */
const IPV4_MAPPED: Range = [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96];
const NAT64: Range = [[0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96];
/** 6to4: bits 16–47 are the IPv4 address of the relay's other end. */
const SIX_TO_FOUR: Range = [[0x20, 0x02], 16];

function inRange(bytes: readonly number[], [net, prefix]: Range): boolean {
  for (let bit = 0; bit < prefix; bit += 8) {
    const left = Math.min(8, prefix - bit);
    const mask = (0xff << (8 - left)) & 0xff;
    if (((bytes[bit / 8] ?? 0) & mask) !== ((net[bit / 8] ?? 0) & mask)) return false;
  }
  return true;
}

function ipv4Bytes(address: string): number[] {
  return address.split('.').map(Number);
}

/** The 16 bytes of a valid IPv6 address (zone already removed), a trailing dotted quad included. */
function ipv6Bytes(address: string): number[] {
  let text = address;
  const tail: number[] = [];
  const quad = /^(.*:)([0-9.]+)$/.exec(text);
  if (quad !== null && (quad[2] ?? '').includes('.')) {
    tail.push(...ipv4Bytes(quad[2] ?? ''));
    text = `${quad[1] ?? ''}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const groups = (s: string): number[] => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const words = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = words.flatMap((w) => [w >> 8, w & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

function ipv4IsPublic(bytes: readonly number[]): boolean {
  return !IPV4_NOT_PUBLIC.some((range) => inRange(bytes, range));
}

function ipv6IsPublic(bytes: readonly number[]): boolean {
  if (inRange(bytes, IPV4_MAPPED) || inRange(bytes, NAT64)) return ipv4IsPublic(bytes.slice(12, 16));
  if (inRange(bytes, SIX_TO_FOUR)) return ipv4IsPublic(bytes.slice(2, 6));
  return inRange(bytes, IPV6_GLOBAL) && !IPV6_NOT_PUBLIC.some((range) => inRange(bytes, range));
}

/** Whether `address` (an IP address as DNS answers it) is a public host; anything else is false. */
export function isPublicAddress(address: string): boolean {
  // A zone (fe80::1%eth0) names a local link: never public.
  if (address.includes('%')) return false;
  switch (isIP(address)) {
    case 4:
      return ipv4IsPublic(ipv4Bytes(address));
    case 6:
      return ipv6IsPublic(ipv6Bytes(address));
    default:
      return false;
  }
}
