//! The capacity search's decisions, driven against servers whose attainment at each load is
//! known.

use super::*;

fn search(min: f64, max: f64, repeats: u32) -> CapacitySearch {
    CapacitySearch {
        class: "headline-sustained-output".into(),
        context: 512,
        vary: Vary::Concurrency,
        min,
        max,
        requests: Some(400),
        window_requests: None,
        target: 0.9,
        window: Window::All,
        slo: vec![Slo::parse("ttft_ms<=2000").unwrap()],
        repeats,
        resolution: None,
        concurrency: None,
    }
}

/// Drive the search against a server whose attainment at load c is `attained(c)` of
/// 400; the exact interval here is a fixed ±2 points, enough to test the logic.
fn drive(s: &CapacitySearch, attained: impl Fn(f64) -> u64) -> (Vec<f64>, Bracket) {
    let interval = |k: u64, n: u64| {
        let p = k as f64 / n as f64;
        ((p - 0.02).max(0.0), (p + 0.02).min(1.0))
    };
    let mut seen: Vec<Observation> = Vec::new();
    loop {
        match next_step(s, &seen, &interval) {
            Step::Probe { load, repeat } => seen.push(Observation {
                load,
                repeat,
                run_id: format!("r{}", seen.len()),
                dir: std::path::PathBuf::new(),
                attained: attained(load),
                requests: 400,
                goodput_tps: None,
            }),
            Step::Done(b) => return (seen.iter().map(|o| o.load).collect(), b),
        }
        assert!(seen.len() < 50, "the search does not end: {seen:?}");
    }
}

#[test]
fn bisection_finds_the_last_load_that_meets_the_target() {
    // Attainment 100% up to 5 in flight, 50% beyond.
    let s = search(1.0, 32.0, 1);
    let (order, b) = drive(&s, |c| if c <= 5.0 { 400 } else { 200 });
    assert_eq!(order, [1.0, 32.0, 16.0, 8.0, 4.0, 6.0, 5.0]);
    assert_eq!(b.passing.as_ref().unwrap().load, 5.0);
    assert_eq!(b.failing.as_ref().unwrap().load, 6.0);
    assert!(b.resolved);
}

#[test]
fn repeats_at_the_boundary_pool_and_a_straddle_is_not_resolved() {
    // 90.5% up to 3 (interval straddles 0.9), 50% beyond: the passing side widens down
    // to the range's minimum without ever clearing the target.
    let s = search(1.0, 8.0, 2);
    let (order, b) = drive(&s, |c| if c <= 3.0 { 362 } else { 200 });
    assert_eq!(order, [1.0, 8.0, 4.0, 2.0, 3.0, 3.0, 4.0, 2.0, 1.0]);
    let p = b.passing.unwrap();
    assert_eq!(
        (p.load, p.runs.len(), p.attained, p.requests),
        (1.0, 2, 724, 800)
    );
    assert!(!b.resolved);
}

/// The minimum misses the target by its point estimate but not by its interval, and the
/// failing side widens up to a load shown to miss it: the loads below stay unresolved,
/// so the search must not say that no load meets the target.
#[test]
fn a_minimum_missing_only_by_its_point_estimate_is_not_resolved() {
    let s = search(3.0, 8.0, 1);
    // 89.5% at 3 and 4 (intervals straddle 0.9), 10% from 5 on.
    let (order, b) = drive(&s, |c| if c <= 4.0 { 358 } else { 40 });
    assert_eq!(order, [3.0, 4.0, 5.0]);
    assert!(b.passing.is_none());
    assert_eq!(b.failing.as_ref().unwrap().load, 5.0);
    assert!(!b.resolved, "{b:?}");
    // Shown to miss at the minimum itself: resolved, no capacity in the range.
    let (_, b) = drive(&s, |_| 40);
    assert!(b.passing.is_none() && b.resolved);
}

/// Attainment falling gradually: 16 meets the target by its point estimate but not by
/// its interval, 17 misses it but not by its interval. The bracket widens to 15 (shown
/// to meet) and 18 (shown to miss): resolved, capacity 15.
#[test]
fn a_gradual_boundary_widens_the_bracket_until_each_side_resolves() {
    let s = search(1.0, 32.0, 1);
    let share = |c: f64| -> u64 {
        match c as u64 {
            0..=14 => 400,
            15 => 372, // 93%: [91, 95]
            16 => 364, // 91%: [89, 93]
            17 => 356, // 89%: [87, 91]
            _ => 348,  // 87%: [85, 89]
        }
    };
    let (order, b) = drive(&s, share);
    assert_eq!(
        order,
        [1.0, 32.0, 16.0, 24.0, 20.0, 18.0, 17.0, 15.0],
        "{order:?}"
    );
    assert!(b.resolved, "{b:?}");
    assert_eq!(b.passing.as_ref().unwrap().load, 15.0);
    assert_eq!(b.failing.as_ref().unwrap().load, 18.0);
    let r = result(
        "TP1",
        &s,
        Judged::Requests,
        &[],
        Vec::new(),
        Ok(b),
        ArmShape {
            replicas: 1,
            gpus: Some(1),
        },
        &|_| None,
    );
    assert_eq!(r.status, CapacityStatus::Resolved);
    assert_eq!(r.capacity, Some(15.0));
}

#[test]
fn out_of_range_ends_say_so() {
    let s = search(2.0, 16.0, 1);
    let (order, b) = drive(&s, |_| 100);
    assert_eq!(order, [2.0]);
    assert!(b.passing.is_none() && b.resolved);
    let (order, b) = drive(&s, |_| 400);
    assert_eq!(order, [2.0, 16.0]);
    assert_eq!(b.passing.unwrap().load, 16.0);
    assert!(b.failing.is_none());
}

#[test]
fn rates_bisect_geometrically_to_the_resolution() {
    let mut s = search(1.0, 16.0, 1);
    s.vary = Vary::Rate;
    s.resolution = Some(0.25);
    s.concurrency = Some(8);
    let (order, b) = drive(&s, |r| if r <= 5.0 { 400 } else { 0 });
    assert_eq!(order, [1.0, 16.0, 4.0, 8.0, 5.657, 4.757]);
    let (p, f) = (b.passing.unwrap().load, b.failing.unwrap().load);
    assert!(f / p <= 1.25, "{p} {f}");
}

#[test]
fn a_probe_too_small_to_resolve_the_target_is_refused_naming_the_minimum() {
    let mut s = search(1.0, 8.0, 1);
    s.target = 0.99;
    s.requests = Some(300);
    let problems = s.problems(
        "arms[0].search",
        1,
        &Default::default(),
        ClassKind::Requests,
    );
    let text = format!("{problems:?}");
    assert!(text.contains("only from 368 requests"), "{text}");
    s.requests = Some(368);
    assert!(
        s.problems(
            "arms[0].search",
            1,
            &Default::default(),
            ClassKind::Requests
        )
        .is_empty()
    );
    s.window = Window::AfterFirstWave;
    let text = format!(
        "{:?}",
        s.problems(
            "arms[0].search",
            2,
            &Default::default(),
            ClassKind::Requests
        )
    );
    assert!(text.contains("give at least 384"), "{text}");
}

#[test]
fn window_requests_size_each_probe_by_its_first_wave_and_are_checked() {
    let mut s = search(4.0, 64.0, 3);
    s.requests = None;
    s.window_requests = Some(60);
    let text = format!(
        "{:?}",
        s.problems(
            "arms[0].search",
            2,
            &Default::default(),
            ClassKind::Requests
        )
    );
    assert!(
        text.contains("needs `vary: concurrency` and `window: after_first_wave`"),
        "{text}"
    );
    s.window = Window::AfterFirstWave;
    assert!(
        s.problems(
            "arms[0].search",
            2,
            &Default::default(),
            ClassKind::Requests
        )
        .is_empty()
    );
    // Two replicas at 12 in flight each: a first wave of 24, then 60 measured.
    assert_eq!(s.probe_requests(12.0, 2), 84);
    assert_eq!(s.probe_requests(4.0, 1), 64);
    s.window_requests = Some(20);
    let text = format!(
        "{:?}",
        s.problems(
            "arms[0].search",
            2,
            &Default::default(),
            ClassKind::Requests
        )
    );
    assert!(text.contains("give at least 36"), "{text}");
    s.requests = Some(400);
    let text = format!(
        "{:?}",
        s.problems(
            "arms[0].search",
            2,
            &Default::default(),
            ClassKind::Requests
        )
    );
    assert!(text.contains("not both and not neither"), "{text}");
}

#[test]
fn capacity_is_stated_per_gpu_with_goodput_per_gpu_across_the_passing_runs() {
    let s = search(1.0, 32.0, 3);
    let (_, bracket) = drive(&s, |c| if c <= 5.0 { 400 } else { 200 });
    let mut bracket = bracket;
    // Goodput of the passing load's three runs: 300, 330, 360 tok/s.
    for (i, run) in bracket
        .passing
        .as_mut()
        .unwrap()
        .runs
        .iter_mut()
        .enumerate()
    {
        run.goodput_tps = Some(300.0 + 30.0 * i as f64);
    }
    let mean_interval = |v: &[f64]| (v.len() > 1).then_some((-1.0, 1.0));
    let shape = ArmShape {
        replicas: 2,
        gpus: Some(2),
    };
    let r = result(
        "DP2",
        &s,
        Judged::Requests,
        &[],
        Vec::new(),
        Ok(bracket.clone()),
        shape,
        &mean_interval,
    );
    assert_eq!(r.capacity, Some(5.0));
    assert_eq!(r.capacity_per_gpu, Some(5.0));
    let g = r.goodput_per_gpu.as_ref().unwrap();
    assert_eq!(
        (g.mean, g.runs, g.low, g.high),
        (165.0, 3, Some(-1.0), Some(1.0))
    );
    assert!(
        r.verdict
            .contains("5 in flight per GPU (5 × 2 replicas on 2 GPUs)"),
        "{}",
        r.verdict
    );
    assert!(
        r.verdict
            .contains("goodput there 165.0 [-1.0, 1.0] tok/s per GPU over 3 runs"),
        "{}",
        r.verdict
    );
    // TP2: one replica over two GPUs holds half as many per GPU.
    let tp2 = ArmShape {
        replicas: 1,
        gpus: Some(2),
    };
    let r = result(
        "TP2",
        &s,
        Judged::Requests,
        &[],
        Vec::new(),
        Ok(bracket.clone()),
        tp2,
        &mean_interval,
    );
    assert_eq!(r.capacity_per_gpu, Some(2.5));
    // GPUs unknown: no per-GPU figure is invented.
    let unknown = ArmShape {
        replicas: 1,
        gpus: None,
    };
    let r = result(
        "X",
        &s,
        Judged::Requests,
        &[],
        Vec::new(),
        Ok(bracket),
        unknown,
        &mean_interval,
    );
    assert_eq!((r.capacity_per_gpu, r.goodput_per_gpu), (None, None));
}

#[test]
fn a_context_above_the_largest_prompt_target_is_refused() {
    let mut s = search(1.0, 8.0, 1);
    s.context = crate::manifest::MAX_PROMPT_TOKEN_TARGET;
    assert!(
        s.problems(
            "arms[0].search",
            1,
            &Default::default(),
            ClassKind::Requests
        )
        .is_empty()
    );
    s.context = i64::MAX as u64;
    let problems = s.problems(
        "arms[0].search",
        1,
        &Default::default(),
        ClassKind::Requests,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].field, "arms[0].search.context");
    assert!(problems[0].message.contains("16777216"), "{problems:?}");
}

#[test]
fn a_session_search_judges_the_declared_sessions_and_a_trace_cannot_be_searched() {
    let mut s = search(1.0, 8.0, 1);
    s.requests = None;
    let sessions = |n| ClassKind::Sessions {
        sessions: n,
        turns: 3,
        open: false,
    };
    assert!(
        s.problems("a", 1, &Default::default(), sessions(60))
            .is_empty()
    );
    let text = format!(
        "{:?}",
        s.problems("a", 1, &Default::default(), sessions(20))
    );
    assert!(text.contains("declares 20 sessions per probe"), "{text}");
    assert!(text.contains("declare at least 36"), "{text}");
    s.window = Window::AfterFirstWave;
    let text = format!(
        "{:?}",
        s.problems("a", 2, &Default::default(), sessions(40))
    );
    assert!(text.contains("after a first wave of up to 16"), "{text}");
    assert!(text.contains("declare at least 52"), "{text}");
    s.requests = Some(400);
    let text = format!(
        "{:?}",
        s.problems("a", 1, &Default::default(), sessions(100))
    );
    assert!(
        text.contains("leave `requests` and `window_requests` out"),
        "{text}"
    );
    s.requests = None;
    let open = ClassKind::Sessions {
        sessions: 100,
        turns: 3,
        open: true,
    };
    let text = format!("{:?}", s.problems("a", 1, &Default::default(), open));
    assert!(text.contains("search `vary: rate`"), "{text}");
    let text = format!(
        "{:?}",
        s.problems("a", 1, &Default::default(), ClassKind::Trace)
    );
    assert!(text.contains("replays a trace at its own times"), "{text}");
    // A bound scoped past every turn the class has judges nothing but success.
    s.slo = vec![Slo::parse("turns 3+: ttft_ms<=800").unwrap()];
    let text = format!(
        "{:?}",
        s.problems("a", 1, &Default::default(), sessions(60))
    );
    assert!(text.contains("no bound applies to a turn"), "{text}");
    s.slo = vec![Slo::parse("turns 2+: ttft_ms<=800").unwrap()];
    assert!(
        s.problems("a", 1, &Default::default(), sessions(60))
            .is_empty()
    );
    let text = format!(
        "{:?}",
        s.problems("a", 1, &Default::default(), ClassKind::Requests)
    );
    assert!(text.contains("no bound applies to a turn"), "{text}");
    s.slo = vec![Slo::parse("ttft_ms<=2000").unwrap()];
    let mut rate = s.clone();
    rate.vary = Vary::Rate;
    rate.resolution = Some(0.1);
    rate.concurrency = Some(8);
    rate.min = 0.0001;
    rate.max = 1e6;
    let text = format!(
        "{:?}",
        rate.problems("a", 1, &Default::default(), sessions(60))
    );
    assert!(
        text.contains("sessions arrive at most 100000 per second"),
        "{text}"
    );
    assert!(text.contains("take over a day"), "{text}");
    let (_, b) = drive(&s, |c| if c <= 3.0 { 400 } else { 280 });
    let r = result(
        "TP1",
        &s,
        Judged::Sessions,
        &[],
        Vec::new(),
        Ok(b),
        ArmShape {
            replicas: 1,
            gpus: Some(2),
        },
        &|_| None,
    );
    assert!(
        r.verdict
            .starts_with("capacity 3 sessions in flight per replica at 90.0% attainment: 3 sessions in flight per replica: 100.0%"),
        "{}",
        r.verdict
    );
    assert!(
        r.verdict.contains("of 400 sessions attained"),
        "{}",
        r.verdict
    );
    assert!(
        r.verdict
            .contains("; 1.50 sessions in flight per GPU (3 × 1 replica on 2 GPUs)"),
        "{}",
        r.verdict
    );
    assert_eq!(r.judged, Judged::Sessions);
}
