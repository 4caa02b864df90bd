//! The studies' fits on their own data files (no sockets, no runs): each
//! declares a training subset, held-out cells cannot move the fit, and
//! the agreement the docs quote.

use super::*;
use crate::published::{compare, load as load_file};

fn studies() -> impl Iterator<Item = &'static str> {
    crate::reproduce::NAMES.iter().map(|(n, _)| *n)
}

#[test]
fn every_study_declares_training_and_held_out_cells() {
    for name in studies() {
        let file = load_file(name).unwrap();
        let (_, used, cells) = fit_file(&file).unwrap().expect(name);
        assert!(!used.is_empty(), "{name}");
        let modelled = |t: bool| {
            cells
                .iter()
                .filter(|c| c.training == t && c.profile.is_ok())
                .count()
        };
        assert!(modelled(true) > 0, "{name}: no modelled training cell");
        assert!(modelled(false) > 0, "{name}: no modelled held-out cell");
    }
}

/// `file` with every held-out (or training) cell's published value
/// multiplied by `k`.
fn scaled(file: &StudyFile, training: bool, k: f64) -> StudyFile {
    let mut f = file.clone();
    let decl = f.fit.clone().unwrap();
    for c in &mut f.cell {
        if decl.is_training(&c.conditions) == training {
            c.value = c.value.map(|v| v * k);
            c.range = c.range.map(|[a, b]| [a * k, b * k]);
        }
    }
    f
}

#[test]
fn held_out_cells_cannot_move_the_fit_and_training_cells_do() {
    for name in studies() {
        let file = load_file(name).unwrap();
        let (base, _, _) = fit_file(&file).unwrap().unwrap();
        let (moved_held, _, _) = fit_file(&scaled(&file, false, 7.0)).unwrap().unwrap();
        assert_eq!(base, moved_held, "{name}: a held-out cell moved the fit");
        let (moved_train, _, _) = fit_file(&scaled(&file, true, 3.0)).unwrap().unwrap();
        assert_ne!(
            base, moved_train,
            "{name}: training cells did not move the fit"
        );
    }
}

#[test]
fn the_comparison_carries_the_fit_and_each_cells_split() {
    let file = load_file("wan-tuning").unwrap();
    let mut cmp = compare(&file, &[]);
    apply(&file, &mut cmp).unwrap();
    let fit = cmp.fit.as_ref().unwrap();
    assert_eq!(
        fit.training_cells,
        cmp.cells.iter().filter(|c| c.training).count()
    );
    assert!(fit.parameters.contains_key("link_payload_rate"));
    assert_eq!(fit.parameters["link_payload_rate"].unit, "MB/s");
    assert_eq!(
        fit.in_sample.compared + fit.out_of_sample.compared,
        cmp.cells
            .iter()
            .filter(|c| c.profile_within_25pct.is_some())
            .count()
    );
    // Nothing measured: the measured split compares nothing.
    assert_eq!(fit.measured_in_sample.compared, 0);
}
