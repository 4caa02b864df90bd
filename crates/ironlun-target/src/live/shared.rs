//! Where two lists of targets are the same objects: an operation on one
//! target leaves the others shared (the same `Arc`s) and in their order,
//! so a comparison need only look at what lies between the shared
//! beginning and the shared end.

/// The lengths of the longest beginning and end (not overlapping) that
/// `a` and `b` share, element by element, as `same` tells.
pub(super) fn shared_ends<A, B>(a: &[A], b: &[B], same: impl Fn(&A, &B) -> bool) -> (usize, usize) {
    let head = a.iter().zip(b).take_while(|(x, y)| same(x, y)).count();
    let room = a.len().min(b.len()) - head;
    let tail = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| same(x, y))
        .count();
    (head, tail)
}

/// What lies between the shared beginning and end of `v`.
pub(super) fn middle<T>(v: &[T], (head, tail): (usize, usize)) -> &[T] {
    v.get(head..v.len().saturating_sub(tail)).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(a: &[u8], b: &[u8]) -> (usize, usize) {
        shared_ends(a, b, |x, y| x == y)
    }

    #[test]
    fn beginnings_and_ends() {
        assert_eq!(ends(b"abcde", b"abcde"), (5, 0));
        assert_eq!(ends(b"abcde", b"abXde"), (2, 2));
        assert_eq!(ends(b"abcde", b"abde"), (2, 2));
        assert_eq!(ends(b"abde", b"abcde"), (2, 2));
        assert_eq!(ends(b"abcde", b"abcdeX"), (5, 0));
        assert_eq!(ends(b"abcde", b"Xabcde"), (0, 5));
        assert_eq!(ends(b"", b"ab"), (0, 0));
        assert_eq!(ends(b"aa", b"aaa"), (2, 0));
        assert_eq!(ends(b"xy", b"yx"), (0, 0));
        let (a, b) = (b"abcde", b"abXYde");
        let e = ends(a, b);
        assert_eq!((middle(a, e), middle(b, e)), (&b"c"[..], &b"XY"[..]));
        let e = ends(b"aa", b"aaa");
        assert_eq!(middle(b"aaa", e), b"a");
        assert_eq!(middle(b"aa", e), b"");
    }
}
