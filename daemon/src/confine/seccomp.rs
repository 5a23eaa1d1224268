//! The seccomp filter a jail is started with: `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)` refused.
//!
//! Why: a jailed program shares its terminal with the pane. `TIOCSTI` pushes bytes into a
//! terminal's input as if typed there; from inside the jail that is input to whatever reads
//! the pane after the jailed program (a shell outside the jail once the CLI exits, or the
//! terminal of the process that started the pane). `bwrap --new-session` would prevent it by
//! taking the controlling terminal away, but then Ctrl-C no longer reaches the program's
//! foreground job (and a shell has no job control), so the filter Flatpak uses is applied
//! instead: every other system call is untouched.
//!
//! The program is classic BPF, written out here (a dozen instructions) rather than taken from
//! a library: it is handed to `bwrap --seccomp FD`, which installs it after building the jail.
//! Only the low 32 bits of the request are compared, as the kernel reads them (a request with
//! high bits set is the same request).

/// `TIOCSTI`: fake input.
const TIOCSTI: u32 = 0x5412;
/// `TIOCLINUX`: among others, pastes the console's selection as input.
const TIOCLINUX: u32 = 0x541C;

const RET_ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_ERRNO | EPERM`.
const RET_EPERM: u32 = 0x0005_0000 | 1;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low half of `args[1]` (the request of an `ioctl`).
#[cfg(target_endian = "little")]
const ARG1_LOW: u32 = 24;
#[cfg(target_endian = "big")]
const ARG1_LOW: u32 = 28;

/// The machine's architecture as seccomp names it: (native arch, its `ioctl`, a mask of
/// system call numbers of another ABI refused whole (x32), the compat arch, its `ioctl`).
#[cfg(target_arch = "x86_64")]
const ARCHES: Option<(u32, u32, u32, u32, u32)> =
    Some((0xC000_003E, 16, 0x4000_0000, 0x4000_0003, 54));
#[cfg(target_arch = "aarch64")]
const ARCHES: Option<(u32, u32, u32, u32, u32)> = Some((0xC000_00B7, 29, 0, 0x4000_0028, 54));
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCHES: Option<(u32, u32, u32, u32, u32)> = None;

/// Where a jump goes.
#[derive(Clone, Copy)]
enum To {
    Next,
    At(usize),
    Allow,
    Deny,
}

/// One instruction before its jumps are resolved.
struct Op {
    code: u16,
    k: u32,
    jt: To,
    jf: To,
}

fn ld(k: u32) -> Op {
    Op {
        code: LD_W_ABS,
        k,
        jt: To::Next,
        jf: To::Next,
    }
}

fn jeq(k: u32, jt: To, jf: To) -> Op {
    Op {
        code: JEQ_K,
        k,
        jt,
        jf,
    }
}

/// The filter for this machine, as the bytes of a `struct sock_filter` array; `None` where
/// the architecture is not known here.
pub fn tiocsti_filter() -> Option<Vec<u8>> {
    let (native, ioctl, other_abi, compat, compat_ioctl) = ARCHES?;
    // Instruction 8 starts the compat architecture's check.
    const COMPAT: usize = 8;
    let ops = vec![
        ld(ARCH),
        jeq(native, To::Next, To::At(COMPAT)),
        ld(NR),
        Op {
            code: JSET_K,
            k: other_abi,
            jt: To::Deny,
            jf: To::Next,
        },
        jeq(ioctl, To::Next, To::Allow),
        ld(ARG1_LOW),
        jeq(TIOCSTI, To::Deny, To::Next),
        jeq(TIOCLINUX, To::Deny, To::Allow),
        // COMPAT
        jeq(compat, To::Next, To::Allow),
        ld(NR),
        jeq(compat_ioctl, To::Next, To::Allow),
        ld(ARG1_LOW),
        jeq(TIOCSTI, To::Deny, To::Next),
        jeq(TIOCLINUX, To::Deny, To::Allow),
    ];
    let allow = ops.len();
    let deny = allow + 1;
    let off = |i: usize, to: To| -> Option<u8> {
        let target = match to {
            To::Next => i + 1,
            To::At(t) => t,
            To::Allow => allow,
            To::Deny => deny,
        };
        u8::try_from(target.checked_sub(i + 1)?).ok()
    };
    let mut out = Vec::with_capacity((ops.len() + 2) * 8);
    let mut push = |code: u16, jt: u8, jf: u8, k: u32| {
        out.extend(code.to_ne_bytes());
        out.push(jt);
        out.push(jf);
        out.extend(k.to_ne_bytes());
    };
    for (i, op) in ops.iter().enumerate() {
        let (jt, jf) = if op.code == LD_W_ABS {
            (0, 0)
        } else {
            (off(i, op.jt)?, off(i, op.jf)?)
        };
        push(op.code, jt, jf, op.k);
    }
    push(RET_K, 0, 0, RET_ALLOW);
    push(RET_K, 0, 0, RET_EPERM);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter as the kernel would, on one system call.
    fn run(prog: &[u8], arch: u32, nr: u32, arg1: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        data[24..32].copy_from_slice(&arg1.to_ne_bytes());
        let insn: Vec<(u16, u8, u8, u32)> = prog
            .chunks(8)
            .map(|c| {
                (
                    u16::from_ne_bytes([c[0], c[1]]),
                    c[2],
                    c[3],
                    u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect();
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let (code, jt, jf, k) = insn[pc];
            pc += 1;
            match code {
                LD_W_ABS => {
                    let o = k as usize;
                    acc = u32::from_ne_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
                }
                JEQ_K => pc += usize::from(if acc == k { jt } else { jf }),
                JSET_K => pc += usize::from(if acc & k != 0 { jt } else { jf }),
                RET_K => return k,
                other => panic!("opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn tiocsti_and_tioclinux_are_refused_and_nothing_else() {
        let Some(prog) = tiocsti_filter() else {
            return; // an architecture the filter does not know: the launcher says so
        };
        let (native, ioctl, other_abi, compat, compat_ioctl) = ARCHES.expect("arch");
        assert_eq!(run(&prog, native, ioctl, 0x5412), RET_EPERM);
        assert_eq!(run(&prog, native, ioctl, 0x541C), RET_EPERM);
        // High bits in the request are ignored by the kernel, and by the filter.
        assert_eq!(run(&prog, native, ioctl, 0xdead_0000_0000_5412), RET_EPERM);
        assert_eq!(run(&prog, native, ioctl, 0x5401), RET_ALLOW, "TCGETS");
        assert_eq!(run(&prog, native, 0, 0x5412), RET_ALLOW, "not an ioctl");
        assert_eq!(run(&prog, compat, compat_ioctl, 0x5412), RET_EPERM);
        assert_eq!(run(&prog, compat, compat_ioctl, 0x5401), RET_ALLOW);
        assert_eq!(run(&prog, compat, 3, 0x5412), RET_ALLOW);
        if other_abi != 0 {
            assert_eq!(run(&prog, native, other_abi | 514, 0x5412), RET_EPERM);
        }
        assert_eq!(prog.len(), 16 * 8);
    }
}
