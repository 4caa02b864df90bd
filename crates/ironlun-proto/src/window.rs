//! Sequence numbers and the command window (RFC 7143 §4.2.2.1).
//!
//! CmdSN, StatSN and DataSN are 32-bit serial numbers compared with
//! RFC 1982 arithmetic (RFC 7143 §4.2.2). The target accepts a non-immediate
//! command whose CmdSN lies in `[ExpCmdSN, MaxCmdSN]`; anything else is
//! silently ignored. ExpCmdSN advances over commands received in order, and
//! MaxCmdSN is set so that at most `queue_depth` commands are held at once.

/// `a < b` in serial number arithmetic (RFC 1982 §3.2, SERIAL_BITS = 32).
pub fn sn_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < (1 << 31)
}

/// `a <= b` in serial number arithmetic.
pub fn sn_le(a: u32, b: u32) -> bool {
    a == b || sn_lt(a, b)
}

/// What to do with a non-immediate command's CmdSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// CmdSN == ExpCmdSN: deliver now.
    InOrder,
    /// Inside the window but ahead of ExpCmdSN: hold until the gap fills.
    Ahead,
    /// Outside the window: silently ignore (RFC 7143 §4.2.2.1).
    Outside,
}

/// The target side of the command window of one session.
#[derive(Clone, Debug)]
pub struct CmdWindow {
    exp_cmd_sn: u32,
    /// The largest MaxCmdSN ever advertised; it must never go backwards, so
    /// admission uses it rather than a freshly computed value.
    max_cmd_sn: u32,
    queue_depth: u32,
    /// Non-immediate commands received and not yet answered.
    in_flight: u32,
}

impl CmdWindow {
    /// A window starting at the CmdSN of the leading Login Request.
    pub fn new(initial_cmd_sn: u32, queue_depth: u32) -> Self {
        let queue_depth = queue_depth.max(1);
        CmdWindow {
            exp_cmd_sn: initial_cmd_sn,
            max_cmd_sn: initial_cmd_sn.wrapping_add(queue_depth.saturating_sub(1)),
            queue_depth,
            in_flight: 0,
        }
    }

    pub fn exp_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn
    }

    /// MaxCmdSN to advertise now: room for `queue_depth - in_flight` more
    /// commands, never lower than what was advertised before.
    pub fn max_cmd_sn(&mut self) -> u32 {
        let credit = self.queue_depth.saturating_sub(self.in_flight);
        // credit 0 gives ExpCmdSN - 1: a closed window (RFC 7143 §4.2.2.1).
        let fresh = self.exp_cmd_sn.wrapping_add(credit).wrapping_sub(1);
        if sn_lt(self.max_cmd_sn, fresh) {
            self.max_cmd_sn = fresh;
        }
        // Commands are admitted only up to MaxCmdSN, so ExpCmdSN passes it
        // by one at most: the window holds 0..=queue_depth commands.
        debug_assert!(
            self.max_cmd_sn
                .wrapping_sub(self.exp_cmd_sn)
                .wrapping_add(1)
                <= self.queue_depth,
            "a window wider than the queue depth or below ExpCmdSN"
        );
        self.max_cmd_sn
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    pub fn queue_depth(&self) -> u32 {
        self.queue_depth
    }

    /// Classifies a non-immediate command's CmdSN. A closed window
    /// (MaxCmdSN = ExpCmdSN - 1) admits nothing, not even ExpCmdSN
    /// (RFC 7143 §4.2.2.1).
    pub fn classify(&self, cmd_sn: u32) -> Admission {
        if !sn_le(cmd_sn, self.max_cmd_sn) {
            Admission::Outside
        } else if cmd_sn == self.exp_cmd_sn {
            Admission::InOrder
        } else if sn_lt(self.exp_cmd_sn, cmd_sn) {
            Admission::Ahead
        } else {
            Admission::Outside
        }
    }

    /// Accepts the command at ExpCmdSN: advances ExpCmdSN and takes a slot.
    pub fn accept_in_order(&mut self) {
        debug_assert!(
            self.in_flight < self.queue_depth,
            "a command admitted past the queue depth"
        );
        self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
        self.in_flight = self.in_flight.saturating_add(1);
    }

    /// A non-immediate command has been answered: its slot frees.
    pub fn release(&mut self) {
        debug_assert!(self.in_flight > 0, "release without a command in flight");
        self.in_flight = self.in_flight.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_arithmetic_wraps() {
        assert!(sn_lt(1, 2));
        assert!(!sn_lt(2, 1));
        assert!(sn_lt(0xffff_fff0, 5));
        assert!(!sn_lt(5, 0xffff_fff0));
        assert!(sn_le(7, 7));
        assert!(!sn_lt(7, 7));
    }

    #[test]
    fn window_admits_exp_to_max_and_ignores_outside() {
        let mut w = CmdWindow::new(10, 4);
        assert_eq!(w.max_cmd_sn(), 13);
        assert_eq!(w.classify(10), Admission::InOrder);
        assert_eq!(w.classify(12), Admission::Ahead);
        assert_eq!(w.classify(13), Admission::Ahead);
        assert_eq!(
            w.classify(14),
            Admission::Outside,
            "MaxCmdSN + 1 is ignored"
        );
        assert_eq!(
            w.classify(9),
            Admission::Outside,
            "CmdSN below ExpCmdSN is ignored"
        );
    }

    #[test]
    fn window_closes_when_full_and_never_shrinks() {
        let mut w = CmdWindow::new(0, 2);
        assert_eq!(w.max_cmd_sn(), 1);
        w.accept_in_order();
        w.accept_in_order();
        // Two in flight, depth 2: closed window, MaxCmdSN = ExpCmdSN - 1.
        assert_eq!(w.exp_cmd_sn(), 2);
        assert_eq!(w.max_cmd_sn(), 1);
        // ExpCmdSN itself is outside a closed window: ignored.
        assert_eq!(w.classify(2), Admission::Outside);
        w.release();
        assert_eq!(w.max_cmd_sn(), 2);
        w.release();
        assert_eq!(w.max_cmd_sn(), 3);
    }

    #[test]
    fn in_flight_never_exceeds_depth_when_initiator_uses_whole_window() {
        let mut w = CmdWindow::new(100, 8);
        let mut next = 100u32;
        let mut peak = 0;
        for round in 0..50 {
            let max = w.max_cmd_sn();
            while sn_le(next, max) {
                assert_eq!(w.classify(next), Admission::InOrder);
                w.accept_in_order();
                next = next.wrapping_add(1);
                peak = peak.max(w.in_flight());
            }
            // Complete a varying number of commands.
            for _ in 0..(round % 3 + 1).min(w.in_flight()) {
                w.release();
            }
        }
        assert!(peak <= 8);
    }

    #[test]
    fn window_across_wrap() {
        let mut w = CmdWindow::new(0xffff_fffe, 4);
        assert_eq!(w.max_cmd_sn(), 1);
        assert_eq!(w.classify(0xffff_ffff), Admission::Ahead);
        assert_eq!(w.classify(1), Admission::Ahead);
        assert_eq!(w.classify(2), Admission::Outside);
    }
}
