#!/usr/bin/env python3
"""Write the committed seed corpora of the fuzz targets (tests/fuzz/corpus/<name>/).

The seeds are small valid inputs, and a few near-misses, in each target's input layout (the
comment at the top of tests/fuzz/fuzz_<name>.c). Run it after changing a layout or a format
(the worker spec's, say); the files it writes are committed. Deterministic: the ed25519 key of
the signature seed comes from a fixed seed (libsodium through ctypes). What the fuzzers find
later is never written here (scripts/fuzz.sh keeps it in build-fuzz/corpus/).

Usage: tests/fuzz/make_seeds.py [CORPUS_DIR]
"""
import base64
import ctypes
import hashlib
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NONCE = b"0123456789abcdef0123456789abcdef"  # fuzz_sse.c's


def u8(v):
    return struct.pack("<B", v)


def u16(v):
    return struct.pack("<H", v)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


# ---- the worker protocol (isolation/proto.c, host byte order: x86-64 and arm64 are little) ----

def spec_str(s):
    return u32(len(s)) + s


def spec(entries, rlimits, filt, hostname=b"sandbox", uid=100000, gid=100000, nprocs=1,
         volumes=(), volume_gid=0, volume_project=0):
    out = b"SHSPEC1\n" + spec_str(hostname) + spec_str(b"/run/sh/root") + spec_str(b"/var/ws")
    out += spec_str(b"/var/tools") + u32(len(entries))
    for name, is_link, where in entries:
        out += u8(1 if is_link else 0) + spec_str(name) + spec_str(where)
    out += u64(64 << 20) + u32(16) + u32(0x01007F64) + u32(uid) + u32(gid) + u32(nprocs) + u32(len(rlimits))
    for res, cur, mx in rlimits:
        out += u32(res) + u64(cur) + u64(mx)
    out += u32(len(filt))
    for code, jt, jf, k in filt:
        out += u16(code) + u8(jt) + u8(jf) + u32(k)
    out += u32(volume_gid) + u32(volume_project) + u32(len(volumes))
    for flags, quota, base, path, sub, target in volumes:
        out += u32(flags) + u64(quota) + spec_str(base) + spec_str(path) + spec_str(sub) + spec_str(target)
    return out


ALLOW = [(0x20, 0, 0, 4), (0x06, 0, 0, 0x7FFF0000)]  # ld arch; ret allow


def proto():
    full = spec([(b"usr", False, b"/images/default/usr"), (b"bin", True, b"usr/bin"),
                 (b"lib", True, b"usr/lib")], [(7, 1024, 1024), (4, 0, 0)], ALLOW)
    # type, id, argc, envc, flags (SH_PROTO_EXEC_INPUT 1, SH_PROTO_EXEC_FRAMES 2,
    # SH_PROTO_EXEC_SHELL 4)
    exec_msg = u32(6) + u32(7) + u32(2) + u32(1) + u32(0) + b"sh\0-c\0PATH=/usr/bin:/bin\0"
    exec_io = u32(6) + u32(8) + u32(3) + u32(0) + u32(3) + b"python3\0-c\0pass\0"
    cmsg = struct.pack("<QII", 16 + 8, 1, 1) + struct.pack("<ii", 5, 6)
    return {
        "spec": b"0" + full,
        "spec-minimal": b"0" + spec([], [], ALLOW[1:], nprocs=0),
        "spec-root": b"0" + spec([], [], ALLOW, uid=0),  # refused: never root
        "spec-trailing": b"0" + full + b"\0",  # refused: bytes after the volumes
        "spec-volumes": b"0" + spec([], [], ALLOW, volume_gid=99999, volumes=[
            (1, 0, b"/data", b"proj", b"a/b", b"/mnt/data"),
            (6, 0, b"/var/lib/sh/volumes", b"claim", b"", b"/workspace/c")]),
        # a named volume made with a quota (pvc.storage) and the project ids' range
        "spec-volume-quota": b"0" + spec([], [], ALLOW, volume_gid=99999,
                                         volume_project=3000000512, volumes=[
            (6, 2 << 20, b"/var/lib/sh/volumes", b"claim", b"", b"/workspace/c")]),
        # refused: a subPath that leaves its volume
        "spec-volume-dotdot": b"0" + spec([], [], ALLOW, volume_gid=99999, volumes=[
            (0, 0, b"/data", b".", b"../etc", b"/mnt/data")]),
        "msg-volume-created": b"2" + u32(7) + u32(0) + u32(1) + u32(0),
        "exec": b"1" + exec_msg,
        "exec-cut": b"1" + exec_msg[:-3],
        "exec-input-frames": b"1" + exec_io,  # a code interpreter's: fds 0 and 3 pipes
        "exec-unknown-flag": b"1" + exec_io[:16] + u32(8) + exec_io[20:],  # refused
        # a /v1 command: NONCE CWD TEXT, entered and run by sandbox-init (exec_shell)
        "exec-shell": b"1" + u32(6) + u32(9) + u32(3) + u32(0) + u32(4) +
                      b"0123456789abcdef0123456789abcdef\0~/sub\0echo hi\0",
        "msg-setup-failed": b"2" + u32(3) + u32(0) + u32(5) + u32(13),
        "msg-exited": b"2" + u32(5) + u32(42) + u32(0x0900) + u32(0),
        "fds": b"3" + u8(40) + cmsg,
        # a last record whose length runs past the buffer (test_proto.c has it as a unit test):
        # a record of 4 fds, then a header claiming 2 more, filling the 48 bytes
        "fds-past-the-end": b"3" + u8(48) + struct.pack("<QII", 16 + 16, 1, 1) +
                            struct.pack("<iiii", 5, 6, 7, 8) + struct.pack("<QII", 16 + 8, 1, 1),
    }


# ---- multipart (opensandbox/multipart.c) ------------------------------------------------------

def multipart():
    sdk = (b"--XyZ\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
           b"Content-Type: application/json\r\n\r\n{\"path\":\"/tmp/a.txt\",\"mode\":644}\r\n"
           b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
           b"Content-Type: application/octet-stream\r\n\r\nhello\r\n--XyZ\r\nnot a delimiter\r\n"
           b"--XyZ--\r\nepilogue")
    return {
        "sdk": b"multipart/form-data; boundary=XyZ\n\x05" + sdk,
        "quoted": b"Multipart/Form-Data; charset=utf-8; boundary=\"a b'()+_,-./:=?\"\n\x00"
                  b"preamble\r\n--a b'()+_,-./:=?\r\nContent-Disposition: form-data; "
                  b"name=\"a\\\"b\"\r\nContent-Transfer-Encoding: binary\r\n\r\n"
                  b"\r\n--a b'()+_,-./:=?--",
        "empty-part": b"multipart/form-data; boundary=b\n\x01--b\r\nContent-Disposition: "
                      b"form-data; name=x\r\n\r\n\r\n--b--",
        "no-part": b"multipart/form-data; boundary=b\n\x01--b--\r\n",
        "cut": b"multipart/form-data; boundary=b\n\x02--b\r\nContent-Disposition: form-data; "
               b"name=f; filename=\"\xc3\xa9.bin\"\r\n\r\n\x00\xff\r\n--",
        "folded": b"multipart/form-data; boundary=b\n\x03--b\r\nContent-Disposition: form-data;"
                  b"\r\n name=f\r\n\r\nx\r\n--b--",
        # near the bounds: a part's headers of ~8 KiB, a preamble of ~8 KiB
        "big-header": b"multipart/form-data; boundary=b\n\x07--b\r\nContent-Disposition: "
                      b"form-data; name=f\r\nX-Pad: " + b"p" * 8100 + b"\r\n\r\nx\r\n--b--",
        "big-preamble": b"multipart/form-data; boundary=b\n\x1f" + b"\r\n" * 4090 +
                        b"--b\r\nContent-Disposition: form-data; name=f\r\n\r\n\r\n--b--",
    }


# ---- passwd and group (fs/passwd.c) -----------------------------------------------------------

def passwd():
    pw = (b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"
          b"# a comment\n+nis::::::\nuser:x:1000:1000:A User,,,:/home/user:/bin/sh\n"
          b"user:x:1001:1001:a later duplicate:/:/bin/sh\nmachine$:x:2000:2000::/:\n"
          b"1000:x:3000:3000::/:\nbad line\nbig:x:4294967295:1::/:\nno-newline:x:5:5::/:")
    gr = b"root:x:0:\nwheel:x:10:root,user\nusers:x:100:\nstaff:x:50\n\x00nul:x:7:\nusers:x:101:"
    return {
        "passwd": b"0user\n" + pw,
        "passwd-id": b"01000\n" + pw,
        "group": b"1wheel\n" + gr,
        "group-missing": b"1nobody\n" + gr,
    }


# ---- mode, range, rules (opensandbox/) --------------------------------------------------------

def mode():
    return {
        "decimal": b"0" + u64(644) + u64(755),
        "decimal-setuid": b"0" + u64(4755) + u64(1777),
        "json": b"1644",
        "json-float": b"16.44e2",
        "json-string": b"1\"644\"",
        "bits": b"2" + u32(0o4755),
    }


def range_():
    out = {}
    for name, size, h in [("first", 1000, b"bytes=0-99"), ("suffix", 1000, b"bytes=-500"),
                          ("open", 1000, b"bytes=100-"), ("past", 10, b"bytes=10-"),
                          ("reversed", 1000, b"BYTES=5-1"), ("several", 1000, b"bytes=0-1,2-3"),
                          ("huge", 1 << 40, b"bytes=99999999999999999999999-")]:
        out[name] = u64(size) + u8(1) + h
    return out


def rules():
    return {
        "cpu": b"0500m",
        "memory": b"01.5Gi",
        "exponent": b"01e3",
        "exa": b"08E",
        "label": b"1example.com/app\nweb-1",
        "label-reserved": b"1opensandbox.io/x\nv",
        "label-bad": b"1-a\n_b",
        "image": b"2registry.example.com/team/python:3.11@sha256:abc",
        "image-dots": b"2..",
        "time": b"32026-01-02T03:04:05.678Z",
        "time-offset": b"31999-12-31T23:59:60.5+01:00",
        "time-leap-day": b"32023-02-29T00:00:00Z",
    }


# ---- http (framing.c, router.c) ---------------------------------------------------------------

def framing():
    return {
        "plain": b"\x00Host:localhost\nContent-Length:5\nUser-Agent:curl/8",
        "chunked": b"\x00Transfer-Encoding:chunked",
        "chunked-10": b"\x01Transfer-Encoding:chunked",
        "both": b"\x00Content-Length:5\nTransfer-Encoding:chunked",
        "repeated": b"\x00Content-Length:5\nContent-Length:5\ncontent-length:6",
        "bad-name": b"\x00Content-Length :5\nX:a\rb",
        "gzip": b"\x00Transfer-Encoding:gzip, chunked",
    }


def router():
    return {
        "native-file": b"0/sandboxes/0123456789abcdef0123456789abcdef/file",
        "native-create": b"2/sandboxes",
        "native-wrong-method": b"3/sandboxes/abc/exec",
        "v1-proxy": b"0/v1/sandboxes/abc/proxy/44772/files/info",
        "v1-endpoint": b"0/v1/sandboxes/abc/endpoints/8080",
        "v1-delete": b"4/v1/sandboxes/abc",
        "v1-empty-segment": b"0/v1/sandboxes//metadata",
        "healthz-head": b"1/healthz",
        "unknown-method": b"6/drain",
    }


# ---- core/util.c ------------------------------------------------------------------------------

def util():
    return {
        "u64": b"018446744073709551615",
        "u64-over": b"018446744073709551616",
        "size": b"1512MiB",
        "millicores": b"20.125",
        "seconds": b"390m",
        "url": b"4\x01a%20b+c%2F%zz",
        "query": b"5path=%2Ftmp%2Fa&recursive=true&x&path=second&=v&k%00=1",
        "path": b"6/a/./b/../c//d/",
        "path-climb": b"6a/../../b",
        "remote-id": b"70123abcd0123456789abcdef0123456789abcdef",
        "item-id": b"7item-1.2_x",
        "quote": b"8caf\xc3\xa9 \xff\xfe \"\\\x01\x7f \xed\xa0\x80 \xf0\x9f\x98\x80",
        "utf8": b"9caf\xc3\xa9 \xe2\x82 \xc0\xaf \xf4\x90\x80\x80 ok",
    }


def json_():
    v1 = (b'{"image":{"uri":"python:3.11"},"entrypoint":["python","-m","http.server"],'
          b'"timeout":3600,"resourceLimits":{"cpu":"500m","memory":"512Mi"},'
          b'"env":{"A":"1"},"metadata":{"team":"ml","example.com/app":"web"},'
          b'"expiresAt":"2026-01-02T03:04:05Z","mode":755}')
    return {
        "v1-create": b"0" + v1,
        "v1-metadata-bad": b'0{"metadata":{"opensandbox.io/x":"y","k":1}}',
        "v1-nul": b'0{"path":"/tmp/a\\u0000b"}',
        "v1-control": b'0{"a":"x\x01"}',
        "v1-trailing": b"0{} {}",
        "native-create": b'1{"image":"default","env":{"A":"1"},"exposed_ports":[8080],'
                         b'"item_id":"task-1"}',
        "native-empty": b"1 \r\n\t",
        "native-bytes": b'1{"path":"/tmp/\\udcff\\udc80","env":null}',
        "native-array": b"1[1,2]",
        "native-bad-item": b'1{"item_id":"-bad"}',
    }


# ---- cluster/peers-pure.c --------------------------------------------------------------------

def peers():
    return {
        "dns": b"0dns:sandbox-host-peers.default.svc.cluster.local",
        "dns-port": b"0dns:peers:8080",
        "dns-bad": b"0dns:a..b:0",
        "static": b"0static:http://10.0.0.1:8080,HTTP://Pod-B/,http://[fd00::1]:9",
        "static-path": b"0static:http://a:1/x,https://b",
        "health": b'1{"status":"ok","cluster":{"token":"0123abcd","instance":"ff00",'
                  b'"accepting":true,"room":17,"in_use":3,"peers":2}}',
        "health-bad": b'1{"cluster":{"token":"0123ABCD","instance":"","accepting":1,"room":-1}}',
    }


# ---- egress/policy.c ---------------------------------------------------------------------------

def egress_policy():
    pol = (b'{"defaultAction":"deny","egress":[{"action":"allow","target":"PyPI.org."},'
           b'{"action":"deny","target":"*.example.com"},{"action":"allow","target":"10.1.2.3/8"}]}')
    return {
        "name": b"0Www.Example.COM.",
        "wildcard": b"0*.pypi.org",
        "cidr": b"0192.168.7.130/25",
        "host": b"0203.0.113.7",
        "bad-octet": b"0010.0.0.1",
        "bad-star": b"0a.*.b",
        "patch": b"1" + pol + b'\n[{"action":"deny","target":"pypi.org"},'
                 b'{"action":"allow","target":"new.test"},{"action":"deny","target":"new.test"}]',
        "patch-empty": b"1{}\n[]",
        "delete": b"2" + pol + b'\n["pypi.org","10.0.0.0/8","never.there"]',
        "delete-bad": b"2null\n[3]",
        "judge": b"3\n*.internal.test,198.51.100.0/24\n" + pol + b"\npypi.org\n" + u32(0x0a010203),
        "judge-default": b"3" + b"127.0.0.0/8,169.254.0.0/16\n\n{}\nmeta.internal.test\n" +
                         u32(0xa9fea9fe),
    }


# ---- egress/dnsmsg.c -------------------------------------------------------------------------

def dns_name(dotted):
    out = b""
    for label in dotted.split(".") if dotted else []:
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def dns_msg(qid, flags, qname, qtype, records=(), ar=b"", arcount=0):
    head = struct.pack(">HHHHHH", qid, flags, 1, len(records), 0, arcount)
    return head + dns_name(qname) + struct.pack(">HH", qtype, 1) + b"".join(records) + ar


def dns_rr(owner, rtype, ttl, rdata):
    return owner + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def dnsmsg():
    opt = b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
    chain = [dns_rr(b"\xc0\x0c", 5, 300, dns_name("github.com")),
             dns_rr(b"\xc0\x10", 1, 60, bytes([140, 82, 121, 3])),
             dns_rr(dns_name("evil.test"), 1, 60, bytes([169, 254, 169, 254]))]
    loop = [dns_rr(b"\xc0\x20", 1, 60, bytes([192, 0, 2, 1]))]
    return {
        "query": b"0" + dns_msg(0x1234, 0x0100, "PyPI.org", 1),
        "query-edns": b"0" + dns_msg(1, 0x0100, "pypi.org", 28, ar=opt, arcount=1),
        "query-dot-label": b"0" + struct.pack(">HHHHHH", 1, 0, 1, 0, 0, 0) + b"\x08pypi.org\0"
                           + struct.pack(">HH", 1, 1),
        "answer-chain": b"1" + dns_msg(7, 0x8180, "www.github.com", 1, chain),
        "answer-tc": b"1" + dns_msg(7, 0x8380, "www.github.com", 1),
        "answer-loop": b"1" + dns_msg(7, 0x8180, "www.github.com", 1, loop),
        "upstream": b"2127.0.0.1:5353",
        "upstream-bad": b"210.0.0.1:99999",
        "resolv": b"3search a.svc\nnameserver fd00::1\nnameserver 10.96.0.10 # dns\n",
    }


# ---- tools (manifest.c, fetch.c's URLs, policy.c) ---------------------------------------------

def signed():
    """A key file, a detached signature and the message it signs (a fixed key)."""
    lib = ctypes.CDLL("libsodium.so.23")
    if lib.sodium_init() < 0:
        raise OSError("sodium_init failed")
    pk, sk = ctypes.create_string_buffer(32), ctypes.create_string_buffer(64)
    lib.crypto_sign_seed_keypair(pk, sk, hashlib.sha256(b"sandbox-host fuzz seed").digest())
    msg = b'{"name":"tool","version":"1"}'
    sig = ctypes.create_string_buffer(64)
    lib.crypto_sign_detached(sig, None, msg, ctypes.c_ulonglong(len(msg)), sk)
    return base64.b64encode(pk.raw), base64.b64encode(sig.raw), msg


def manifest():
    m = (b'{"name":"rg","version":"14.1.0","bundle":{"url":"../bundles/rg.tar.gz",'
         b'"sha256":"' + b"A" * 32 + b"0" * 32 + b'"},"commands":[{"name":"rg","path":"bin/rg"}]}')
    key, sig, msg = signed()
    return {
        "manifest": b"0" + m,
        "manifest-bad-sha": b'0{"name":"x","version":"1","bundle":{"url":"u","sha256":"zz"},'
                            b'"commands":[]}',
        "keys": b"1# publisher\n\n  " + key + b"  \n" + key + b"\n",
        "keys-bad": b"1" + key[:-4] + b"\n",
        "signature": b"2" + key + b"\n\n" + sig + b"\n" + msg,
        "urls": b"3https://tools.example.com/t/rg/manifest.json\n../bundles/rg.tar.gz?x=1#f",
        "urls-absolute": b"3http://127.0.0.1:8080/m.json\nhttps://cdn.example.com/b.tgz",
    }


def policy():
    return {
        "bundle": b"d.\ndbin\nfbin/tool\t1024\nxbin/suid\t10\nlbin/alias\ttool\n"
                  b"hbin/hard\tbin/tool\nfshare/doc/README\t0",
        "escapes": b"f../x\nl/abs\t/etc/passwd\nllink\t../../etc\nflink/below\t1\n"
                   b"hh\tnowhere\ncdev\npfifo\nf/root\t1\nfneg\t-1",
        "deep": b"f" + b"a/" * 70 + b"x\t1",
    }


# ---- isolation/cgroup-parse.c -----------------------------------------------------------------

def cgroup():
    mountinfo = (b"22 1 0:21 / /sys ro,nosuid - sysfs sysfs rw\n"
                 b"30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
                 b"31 22 0:27 /kubepods /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                 b"32 22 0:28 / /sys/fs/cgroup/cpu\\054cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
                 b"33 22 0:29 / /mnt/with\\040space rw shared:1 - cgroup cgroup rw,pids\n")
    return {
        "proc-self-v2": b"0\x00" + b"0::/user.slice/user-0.slice/session-1.scope\n",
        "proc-self-v1": b"0\x01" + b"12:pids:/a\n4:memory:/kubepods/pod:x/c\n2:cpu,cpuacct:/x\n",
        "mountinfo-v2": b"1\x00" + mountinfo,
        "mountinfo-v1": b"1\x01" + mountinfo,
        "mountinfo-escaped": b"1\x02" + mountinfo,
        "join": b"2/sys/fs/cgroup\n/\n/user.slice/a",
        "join-root": b"2/sys/fs/cgroup/memory\n/kubepods\n/kubepods/pod1/c",
        "join-climb": b"2/sys/fs/cgroup\n/\n/../x",
        "keyed": b"3oom_kill\nlow 0\nhigh 0\nmax 0\noom 1\noom_kill 18446744073709551615\n",
        "stat": b"41234 (a (b) c) S 1 1 1 0 -1 4194560 100 0 0 0 10 20 30 40 20 0 1 0 1 0 0",
        "token": b"5memory\ncpuset cpu io memory hugetlb pids rdma misc\n",
        "digits": b"6123456789012",
    }


# ---- opensandbox/access.c ---------------------------------------------------------------------

def acl_bytes(entries):
    return u32(2) + b"".join(u16(tag) + u16(perm) + u32(i) for tag, perm, i in entries)


def acl():
    def head(uid, gid, mode, who, gids, want):
        h = u32(uid) + u32(gid) + u32(mode) + u32(who) + u8(len(gids))
        return h + b"".join(u32(g) for g in (gids + [0, 0, 0])[:3]) + u8(want)

    full = acl_bytes([(1, 7, 0xFFFFFFFF), (2, 4, 1000), (2, 6, 1001), (4, 5, 0xFFFFFFFF),
                      (8, 7, 100), (0x10, 5, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)])
    minimal = acl_bytes([(1, 6, 0xFFFFFFFF), (4, 4, 0xFFFFFFFF), (0x20, 4, 0xFFFFFFFF)])
    return {
        "named": head(0, 0, 0o100750, 1000, [1000], 4) + full,
        "group": head(0, 100, 0o40770, 2000, [100, 5], 3) + full,
        "minimal": head(0, 0, 0o100644, 1000, [], 2) + minimal,
        "own": head(1000, 1000, 0o100000, 1000, [1000], 7) + minimal,
        "no-mask": head(0, 0, 0o100770, 1000, [1000], 4) + acl_bytes(
            [(1, 7, 0xFFFFFFFF), (2, 4, 1000), (4, 5, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]),
    }


# ---- the exec encoders (opensandbox/sse.c, native/ndjson.c) -----------------------------------

def chunk(op, data):
    return op + u8(len(data)) + data


def sse():
    hs = chunk(b"o", NONCE + b" ok\n")
    return {
        "lines": b"\x00" + chunk(b"o", b"hello\nwor") + chunk(b"o", b"ld\r\n\r\n\rx") +
                 chunk(b"e", b"oops\xff\xc3\n") + b"h" + b"x\x00",
        "error": b"\x00" + chunk(b"o", b"\x00\x01\x7f\"\\ \xed\xa0\x80") + b"x\x89",
        "engine-error": b"\x00" + chunk(b"o", b"partial") + chunk(b"E", b"sandbox gone"),
        "session": b"\x01" + chunk(b"o", b"out\n\n" + NONCE + b"\nPWD=/tmp\n" + NONCE + b".\n") +
                   b"x\x00",
        "handshake": b"\x02" + hs + chunk(b"o", b"after\n") + b"x\x00",
        "handshake-merged": b"\x06" + chunk(b"o", b"sh: noise\n") + hs + chunk(b"o", b"x\n") +
                            b"x\x01",
        "handshake-nodir": b"\x02" + chunk(b"o", NONCE + b" nodir\n") + b"x\x01",
        "long-line": b"\x00O\x87\xe2\x82\xac" + chunk(b"o", b"\n") + b"x\x00",
    }


def ndjson():
    return {
        "events": chunk(b"o", b"hello\n") + chunk(b"e", b"\x00\xff\xfe") + b"h" +
                  b"x\x01\x5f" + b"0123456789A",
        "signal": b"x\x89\x07",
        "error": chunk(b"E", b"worker gone \xff\"\\"),
        "long": chunk(b"o", bytes(range(255))) + chunk(b"o", b"x" * 33),
    }


# ---- images (ref.c, oci.c, auth.c) -----------------------------------------------------------

D1 = b"sha256:" + b"1" * 64
D2 = b"sha256:" + b"2" * 64


def image_ref():
    return {
        "official": b"python",
        "tagged": b"python:3.12-slim",
        "user": b"user/img",
        "hub": b"index.docker.io/library/busybox:1.36",
        "registry-port": b"127.0.0.1:5000/team/app:v1",
        "localhost": b"localhost/busybox",
        "ipv6": b"[::1]:5000/busybox",
        "digest": b"ghcr.io/org/app@" + D1,
        "tag-digest": b"host:5000/p:tag@" + D1,
        "separators": b"g/a.b_c__d-e---f",
        "uppercase": b"Python",
        "sha512": b"a@sha512:" + b"0" * 128,
    }


def oci_manifest(mt, ct, layers):
    return (b'{"schemaVersion":2,' + (b'"mediaType":"' + mt + b'",' if mt else b"") +
            b'"config":{"mediaType":"' + ct + b'","digest":"' + D1 + b'","size":1234},'
            b'"layers":[' + b",".join(b'{"mediaType":"' + t + b'","digest":"' + D2 +
                                      b'","size":10}' for t in layers) + b"]}")


def oci_entry(mt, digest, os_, arch, variant=None):
    p = b'{"os":"' + os_ + b'","architecture":"' + arch + b'"'
    p += (b',"variant":"' + variant + b'"}') if variant else b"}"
    return (b'{"mediaType":"' + mt + b'","digest":"' + digest + b'","size":10,"platform":' +
            p + b"}")


def oci():
    om = b"application/vnd.oci.image.manifest.v1+json"
    oi = b"application/vnd.oci.image.index.v1+json"
    dm = b"application/vnd.docker.distribution.manifest.v2+json"
    dl = b"application/vnd.docker.distribution.manifest.list.v2+json"
    oc = b"application/vnd.oci.image.config.v1+json"
    dc = b"application/vnd.docker.container.image.v1+json"
    gz = b"application/vnd.oci.image.layer.v1.tar+gzip"
    index = (b'{"schemaVersion":2,"mediaType":"' + oi + b'","manifests":[' + b",".join([
        oci_entry(om, D1, b"linux", b"amd64"), oci_entry(om, D2, b"linux", b"arm64", b"v8"),
        oci_entry(om, D2, b"linux", b"arm", b"v6"), oci_entry(om, D1, b"unknown", b"unknown")])
        + b"]}")
    return {
        "oci-manifest": b"0" + om + b"\n" + oci_manifest(om, oc, [gz, gz[:-5], gz[:-4] + b"zstd"]),
        "docker-manifest": b"0" + dm + b"; charset=utf-8\n" + oci_manifest(
            dm, dc, [b"application/vnd.docker.image.rootfs.diff.tar.gzip"]),
        "shape-manifest": b"0\n" + oci_manifest(None, oc, [gz]),
        "oci-index": b"0" + oi + b"\n" + index,
        "docker-list": b"0\n" + b'{"schemaVersion":2,"mediaType":"' + dl + b'","manifests":[' +
                       oci_entry(dm, D1, b"linux", b"arm", b"v7") + b"]}",
        "schema1": b"0application/vnd.docker.distribution.manifest.v1+prettyjws\n"
                   b'{"schemaVersion":1,"name":"x","fsLayers":[]}',
        "artifact": b"0\n" + oci_manifest(om, b"application/vnd.oci.empty.v1+json", [gz]),
        "config": b'1{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/bin",'
                  b'"LANG=C.UTF-8"],"WorkingDir":"/app","User":"1000"},"rootfs":{"type":"layers",'
                  b'"diff_ids":["' + D1 + b'","' + D2 + b'"]}}',
        "config-relative-workdir": b'1{"config":{"WorkingDir":"app","Env":["X"]},'
                                   b'"rootfs":{"type":"layers","diff_ids":[]}}',
    }


def registry_auth():
    auth = base64.b64encode(b"alice:s3cr:et")
    return {
        "bearer": b'0Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
                  b'scope="repository:library/python:pull"',
        "several": b'0Negotiate, NTLM abc+/de==, Basic realm="r", Bearer realm="https://t"',
        "escapes": b'0Basic realm="a \\"quoted\\" \\\\ realm"',
        "malformed": b'0Bearer realm="x" junk',
        "config-hub": b'1docker.io\n{"auths":{"https://index.docker.io/v1/":{"auth":"' + auth +
                      b'"}}}',
        "config-host": b'1127.0.0.1:5000\n{"auths":{"http://127.0.0.1:5000/v2/":'
                       b'{"username":"u","password":"p"}}}',
        "config-bad-base64": b'1ghcr.io\n{"auths":{"ghcr.io":{"auth":"Ym9iOnB3="}}}',
        "token": b'2{"token":"abc.def-ghi","expires_in":300}',
        "access-token": b'2{"access_token":"xyz"}',
        "base64": b"3" + auth,
        "base64-bad": b"3Zh==",
    }


TARGETS = {
    "proto": proto, "multipart": multipart, "passwd": passwd, "mode": mode, "range": range_,
    "rules": rules, "framing": framing, "router": router, "util": util, "json": json_,
    "manifest": manifest, "policy": policy, "cgroup": cgroup, "acl": acl, "sse": sse,
    "ndjson": ndjson, "image_ref": image_ref, "oci": oci, "registry_auth": registry_auth,
    "peers": peers, "egress_policy": egress_policy, "dnsmsg": dnsmsg,
}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    missing = {f[5:-2] for f in os.listdir(HERE) if f.startswith("fuzz_") and f.endswith(".c")}
    missing -= set(TARGETS)
    if missing:
        sys.exit(f"make_seeds.py: no seeds for {', '.join(sorted(missing))}")
    for name, make in TARGETS.items():
        d = os.path.join(root, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for seed, data in make().items():
            with open(os.path.join(d, seed), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
