//! Charts of latency runs, so that two brokers measured the same way can be seen on one page.
//!
//! A suite saves each run as a [`Series`] (JSON): the latency over time and the percentile
//! distribution. [`write_charts`] draws any number of them together, one line each, as two SVG
//! files. SVG only: plotters' SVG backend writes text as `<text>` elements and estimates text
//! widths itself, so nothing needs a font file or a system library.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use laminar_metrics::{Histogram, LatencyHistogram};
use plotters::coord::combinators::WithKeyPoints;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// The bucket the suites use for latency over time: short enough to show a stall of a few
/// hundred milliseconds as its own peak, long enough that a 10-minute run is 6,000 buckets.
pub const OVER_TIME_BUCKET: Duration = Duration::from_millis(100);
/// A [`TimeSeries`] keeps at most this many buckets (29 hours at 100 ms); later samples are
/// counted in [`TimeSeries::dropped`] and left out of the chart.
pub const OVER_TIME_BUCKETS_MAX: usize = 1 << 20;
/// [`TimeSeries::points`] merges adjacent buckets (keeping the max) down to at most this many
/// points: more cannot be told apart on a chart, and the JSON stays small.
pub const OVER_TIME_POINTS_MAX: usize = 5000;
/// Percentile points per decade of 1/(1-p) (0 to 90%, 90% to 99%, ...).
const PERCENTILE_STEPS_PER_DECADE: u32 = 20;
/// The highest percentile computed is 1 - 10^-5: p99.999. The max comes after it.
const PERCENTILE_DECADES_MAX: u32 = 5;

const CHART_PIXELS: (u32, u32) = (1100, 650);
/// Roughly what is left of CHART_PIXELS' height for the plot itself.
const PLOT_HEIGHT_PIXELS: u32 = 480;
const NOTE_LINE_PIXELS: u32 = 20;
const LEGEND_LINE_PIXELS: u32 = 22;
const CAPTION_FONT: (&str, u32) = ("sans-serif", 28);
const AXIS_DESC_FONT: (&str, u32) = ("sans-serif", 18);
const AXIS_LABEL_FONT: (&str, u32) = ("sans-serif", 16);
const LEGEND_FONT: (&str, u32) = ("sans-serif", 17);
/// A percentile series with at most this many points (a tool that prints only p50, p99, ...)
/// gets a dot at each: the line between them is not measured.
const SPARSE_PERCENTILE_POINTS: usize = 12;
const NOTE_FONT: (&str, u32) = ("sans-serif", 16);
/// The Tableau 10 palette, distinct on screen and on paper; series past ten reuse colours.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One run's latencies, as a suite saves them for `laminar perf plot`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The legend, e.g. "Laminar acks=all".
    pub label: String,
    /// (seconds since the run started, latency in ms), e.g. the max of each 100 ms bucket.
    #[serde(default)]
    pub over_time: Vec<(f64, f64)>,
    /// (percentile 0..=100, latency in ms), ascending; a point at 100 is the max.
    #[serde(default)]
    pub percentiles: Vec<(f64, f64)>,
    /// What was measured and how it was bucketed; printed under the charts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_note: Option<String>,
}

impl Series {
    /// The percentile distribution of a histogram of microseconds (see
    /// [`percentile_points`]), with no time series yet.
    pub fn from_histogram(label: impl Into<String>, latency_us: &Histogram<u64>) -> Series {
        Series {
            label: label.into(),
            over_time: Vec::new(),
            percentiles: percentile_points(latency_us),
            unit_note: None,
        }
    }

    pub fn from_latency_histogram(label: impl Into<String>, latency: &LatencyHistogram) -> Series {
        Series::from_histogram(label, &latency.snapshot())
    }

    pub fn with_over_time(mut self, over_time: &TimeSeries) -> Series {
        self.over_time = over_time.points();
        self
    }

    pub fn with_unit_note(mut self, note: impl Into<String>) -> Series {
        self.unit_note = Some(note.into());
        self
    }

    /// Writes this series as one JSON object, which [`read_series`] reads back.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        self.write_json_to(file)
            .with_context(|| format!("write {}", path.display()))
    }

    /// As [`Series::write_json`], to a file or stream the caller opened (e.g. before a long
    /// run, so that a bad path fails at once).
    pub fn write_json_to(&self, out: impl Write) -> anyhow::Result<()> {
        let mut out = BufWriter::new(out);
        serde_json::to_writer(&mut out, self)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(())
    }
}

/// Writes several series to one file or stream as [`read_series`] reads them: one JSON
/// object for one series, an array for any other number.
pub fn write_series_json_to(series: &[Series], out: impl Write) -> anyhow::Result<()> {
    if let [one] = series {
        return one.write_json_to(out);
    }
    let mut out = BufWriter::new(out);
    serde_json::to_writer(&mut out, series)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Reads a JSON file holding one [`Series`] or an array of them.
pub fn read_series(path: &Path) -> anyhow::Result<Vec<Series>> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_reader(BufReader::new(file)).with_context(|| format!("read {}", path.display()))?;
    // Not an untagged enum: its error would not say which field is wrong.
    let series = if json.is_array() {
        serde_json::from_value(json)
    } else {
        serde_json::from_value(json).map(|s| vec![s])
    };
    series.with_context(|| format!("{} is not a series or an array of series", path.display()))
}

/// HdrHistogram's percentile distribution of a histogram of microseconds, in milliseconds:
/// points evenly spaced on the 1/(1-p) scale (20 per decade: p0 .. p90 .. p99 .. p99.9 ...)
/// and p50, up to p99.999 or to the last percentile the sample count resolves (p99.9 needs 1,000
/// samples), then the max at 100. The values are `value_at_quantile`'s, so they agree with
/// the p50, p99 and p99.9 the reports print. Empty for an empty histogram.
pub fn percentile_points(latency_us: &Histogram<u64>) -> Vec<(f64, f64)> {
    if latency_us.is_empty() {
        return Vec::new();
    }
    let decades_resolved = (latency_us.len() as f64)
        .log10()
        .min(f64::from(PERCENTILE_DECADES_MAX));
    let grid = (0..=PERCENTILE_DECADES_MAX * PERCENTILE_STEPS_PER_DECADE)
        .map(|step| f64::from(step) / f64::from(PERCENTILE_STEPS_PER_DECADE))
        .take_while(|decades| *decades <= decades_resolved + 1e-9)
        .map(|decades| 1.0 - 10f64.powf(-decades));
    // The median too, which the grid steps over (it is at 0.301 decades).
    let mut quantiles: Vec<f64> = grid.chain(std::iter::once(0.5)).collect();
    quantiles.sort_by(f64::total_cmp);
    let mut points: Vec<(f64, f64)> = quantiles
        .into_iter()
        .map(|q| {
            // Rounded so that the JSON reads "99.9", not "99.90000000000001".
            let percentile = (q * 100.0 * 1e9).round() / 1e9;
            (percentile, us_to_ms(latency_us.value_at_quantile(q)))
        })
        .collect();
    points.push((100.0, us_to_ms(latency_us.max())));
    points
}

fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Latency over time: the max latency of each fixed bucket of time since the run started.
///
/// Cheap enough for a delivery callback at a million records a second: `record` is a
/// division, a bounds check and a max, plus an occasional `Vec` growth. It is not shared
/// between threads: keep it beside the histogram under the same lock, or keep one per thread
/// and [`merge`](TimeSeries::merge) them.
#[derive(Debug, Clone)]
pub struct TimeSeries {
    bucket_us: u64,
    /// The max latency of each bucket in µs; 0 where a bucket had no sample.
    max_us: Vec<u64>,
    dropped: u64,
}

impl TimeSeries {
    pub fn new(bucket: Duration) -> TimeSeries {
        let bucket_us = bucket.as_micros() as u64;
        assert!(bucket_us > 0, "a time series bucket must be at least 1 µs");
        TimeSeries {
            bucket_us,
            max_us: Vec::new(),
            dropped: 0,
        }
    }

    /// With room for `expected` of run time, so that recording does not grow the vector.
    pub fn with_expected(bucket: Duration, expected: Duration) -> TimeSeries {
        let mut ts = TimeSeries::new(bucket);
        let buckets = (expected.as_micros() as u64 / ts.bucket_us) as usize + 1;
        ts.max_us.reserve(buckets.min(OVER_TIME_BUCKETS_MAX));
        ts
    }

    /// One sample: at `since_start` into the run, a latency of `latency_us`.
    #[inline]
    pub fn record(&mut self, since_start: Duration, latency_us: u64) {
        let bucket = (since_start.as_micros() as u64 / self.bucket_us) as usize;
        if bucket >= OVER_TIME_BUCKETS_MAX {
            self.dropped += 1;
            return;
        }
        if bucket >= self.max_us.len() {
            self.max_us.resize(bucket + 1, 0);
        }
        let max = &mut self.max_us[bucket];
        // At least 1 µs, as the histograms record, so that 0 keeps meaning "no sample".
        *max = (*max).max(latency_us.max(1));
    }

    /// Adds another thread's samples; both must use the same bucket.
    pub fn merge(&mut self, other: &TimeSeries) {
        assert_eq!(
            self.bucket_us, other.bucket_us,
            "merging time series of different buckets"
        );
        if other.max_us.len() > self.max_us.len() {
            self.max_us.resize(other.max_us.len(), 0);
        }
        for (mine, theirs) in self.max_us.iter_mut().zip(&other.max_us) {
            *mine = (*mine).max(*theirs);
        }
        self.dropped += other.dropped;
    }

    pub fn bucket(&self) -> Duration {
        Duration::from_micros(self.bucket_us)
    }

    /// Samples past [`OVER_TIME_BUCKETS_MAX`] buckets, left out.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// (bucket start in seconds, max latency in ms) of every bucket that had a sample. Past
    /// [`OVER_TIME_POINTS_MAX`] buckets, adjacent ones are merged (keeping the max), so a
    /// stall is never averaged away.
    pub fn points(&self) -> Vec<(f64, f64)> {
        let per_point = self.max_us.len().div_ceil(OVER_TIME_POINTS_MAX).max(1);
        self.max_us
            .chunks(per_point)
            .enumerate()
            .filter_map(|(i, chunk)| {
                let max = chunk.iter().copied().max().unwrap_or(0);
                // From whole µs, so that the JSON reads 0.3 rather than 0.30000000000000004.
                let start_us = (i * per_point) as u64 * self.bucket_us;
                (max > 0).then(|| (start_us as f64 / 1e6, us_to_ms(max)))
            })
            .collect()
    }
}

/// Draws `series` into two SVG files, `PREFIX-over-time.svg` (latency against time since the
/// start) and `PREFIX-percentiles.svg` (latency by percentile on HdrHistogram's 1/(1-p)
/// scale), one line per series, latency on a log scale. Returns the paths written: when no
/// series has a point over time (e.g. tools that print only percentiles), there is no
/// over-time chart, only the percentiles one. A series with nothing to draw on a chart is
/// still in its legend, in the same colour on both.
pub fn write_charts(path_prefix: &Path, title: &str, series: &[Series]) -> anyhow::Result<Vec<PathBuf>> {
    if let Some(dir) = path_prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut paths = Vec::new();
    if series.iter().any(|s| plottable(&s.over_time).next().is_some()) {
        let over_time = with_suffix(path_prefix, "-over-time.svg");
        draw_over_time(&over_time, title, series).with_context(|| format!("draw {}", over_time.display()))?;
        paths.push(over_time);
    }
    let percentiles = with_suffix(path_prefix, "-percentiles.svg");
    draw_percentiles(&percentiles, title, series)
        .with_context(|| format!("draw {}", percentiles.display()))?;
    paths.push(percentiles);
    Ok(paths)
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// plotters' errors hold the backend's error; anyhow needs them owned and 'static.
fn drawing<T, E: std::fmt::Display>(r: Result<T, E>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow!("{e}"))
}

/// The fraction of the plot's height the legend takes, at the top: it is left free of data.
fn legend_headroom(series: &[Series]) -> f64 {
    let legend_pixels = LEGEND_LINE_PIXELS * series.len() as u32 + 16;
    (f64::from(legend_pixels) / f64::from(PLOT_HEIGHT_PIXELS)).min(0.5)
}

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Finite points with a positive latency: the log scale cannot show 0.
fn plottable(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *y > 0.0)
}

/// The chart area above and the notes below: each distinct `unit_note`, once.
fn split_notes<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[Series],
) -> anyhow::Result<DrawingArea<DB, Shift>> {
    let mut notes: Vec<&str> = Vec::new();
    for n in series.iter().filter_map(|s| s.unit_note.as_deref()) {
        if !notes.contains(&n) {
            notes.push(n);
        }
    }
    if notes.is_empty() {
        return Ok(root.clone());
    }
    let footer = NOTE_LINE_PIXELS * notes.len() as u32 + 8;
    let (chart, below) = root.split_vertically(CHART_PIXELS.1.saturating_sub(footer));
    let style = NOTE_FONT.into_font().color(&BLACK.mix(0.7));
    for (i, note) in notes.iter().enumerate() {
        drawing(below.draw_text(note, &style, (12, 4 + (i as u32 * NOTE_LINE_PIXELS) as i32)))?;
    }
    Ok(chart)
}

/// A log axis from a 1-2-5 step at or below the smallest value to one at or above the
/// largest, labelled at the 1-2-5 steps (only the powers of ten past four decades) with a
/// light line at every 1..9 x 10^e. The top `headroom` of the axis (a fraction) is left
/// above the largest value, for the legend.
fn log_axis(values: impl Iterator<Item = f64>, headroom: f64) -> WithKeyPoints<LogCoord<f64>> {
    let (mut lo, mut hi) = (f64::INFINITY, 0f64);
    for v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !(lo.is_finite() && hi > 0.0) {
        (lo, hi) = (0.1, 1.0);
    }
    let lo = step_at_or_below(lo);
    let decades = (hi / lo).log10().max(0.3);
    let mut hi = step_at_or_above(lo * 10f64.powf(decades / (1.0 - headroom)));
    if hi <= lo {
        hi = step_at_or_above(lo * 1.000_001);
    }
    let (e_lo, e_hi) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let bold_mantissas: &[f64] = if e_hi - e_lo <= 4 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let steps = |mantissas: &[f64]| {
        let mut v = Vec::new();
        for e in e_lo..=e_hi {
            for m in mantissas {
                let step = m * 10f64.powi(e);
                if step >= lo * (1.0 - 1e-9) && step <= hi * (1.0 + 1e-9) {
                    v.push(step);
                }
            }
        }
        v
    };
    (lo..hi)
        .log_scale()
        .with_key_points(steps(bold_mantissas))
        .with_light_points(steps(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]))
}

const STEPS_125: [f64; 4] = [1.0, 2.0, 5.0, 10.0];

fn step_at_or_below(v: f64) -> f64 {
    let e = v.log10().floor() as i32;
    let scale = 10f64.powi(e);
    STEPS_125
        .iter()
        .rev()
        .map(|m| m * scale)
        .find(|s| *s <= v * (1.0 + 1e-9))
        .unwrap_or(scale)
}

fn step_at_or_above(v: f64) -> f64 {
    let e = v.log10().floor() as i32;
    let scale = 10f64.powi(e);
    STEPS_125
        .iter()
        .map(|m| m * scale)
        .find(|s| *s >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * scale)
}

/// "0.05", "2", "1500": no trailing zeros, no exponent.
fn format_number(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

fn draw_over_time(path: &Path, title: &str, series: &[Series]) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, CHART_PIXELS).into_drawing_area();
    drawing(root.fill(&WHITE))?;
    let area = split_notes(&root, series)?;
    let t_max = series
        .iter()
        .flat_map(|s| plottable(&s.over_time))
        .map(|(t, _)| t)
        .fold(0f64, f64::max);
    let x_max = if t_max > 0.0 { t_max * 1.02 } else { 1.0 };
    let y_axis = log_axis(
        series.iter().flat_map(|s| plottable(&s.over_time).map(|p| p.1)),
        legend_headroom(series),
    );
    let mut chart = drawing(
        ChartBuilder::on(&area)
            .caption(format!("{title}: latency over time"), CAPTION_FONT.into_font())
            .margin(12)
            .x_label_area_size(55)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..x_max, y_axis),
    )?;
    drawing(
        chart
            .configure_mesh()
            .x_desc("time since start (s)")
            .y_desc("latency (ms, log scale)")
            .x_label_formatter(&|x| format_number(*x))
            .y_label_formatter(&|y| format_number(*y))
            .axis_desc_style(AXIS_DESC_FONT)
            .label_style(AXIS_LABEL_FONT)
            .light_line_style(BLACK.mix(0.06))
            .bold_line_style(BLACK.mix(0.15))
            .draw(),
    )?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        drawing(chart.draw_series(LineSeries::new(plottable(&s.over_time), c.stroke_width(1))))?
            .label(&s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        // A run shorter than one bucket has a single point, which a line does not show.
        if plottable(&s.over_time).nth(1).is_none() {
            drawing(chart.draw_series(plottable(&s.over_time).map(|p| Circle::new(p, 3, c.filled()))))?;
        }
    }
    drawing(
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(LEGEND_FONT)
            .draw(),
    )?;
    drawing(root.present())
}

/// The percentile axis: x = log10(1 / (1 - p)), so that 90%, 99%, 99.9% ... are evenly
/// spaced, as HdrHistogram plots them.
fn percentile_x(percentile: f64) -> f64 {
    -(1.0 - percentile.clamp(0.0, 100.0) / 100.0).log10()
}

/// "50%", "90%", "99%", "99.9%", "99.99%" for x = log10(2), 1, 2, 3, 4.
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    let decimals = (x.round() as i32 - 2).max(0) as usize;
    format!("{p:.decimals$}%")
}

/// A linear axis over x = log10(1 / (1 - p)) with a tick at each given x. plotters'
/// `with_key_points` would do, but over an f64 range it leaves the axis without the default
/// label formatting that `configure_mesh` requires (even with a formatter given).
struct PercentileAxis {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for PercentileAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, x: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(x, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.linear.range()
    }
}

fn draw_percentiles(path: &Path, title: &str, series: &[Series]) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, CHART_PIXELS).into_drawing_area();
    drawing(root.fill(&WHITE))?;
    let area = split_notes(&root, series)?;
    // The max (p100) is infinitely far right on this scale: it goes half a decade past the
    // highest finite percentile of any series, under its own label.
    let finite = |p: f64| p < 100.0;
    let x_finite = series
        .iter()
        .flat_map(|s| plottable(&s.percentiles))
        .filter(|(p, _)| finite(*p))
        .map(|(p, _)| percentile_x(p))
        .fold(1.0, f64::max);
    let has_max = series
        .iter()
        .flat_map(|s| plottable(&s.percentiles))
        .any(|(p, _)| !finite(p));
    let x_of_max = x_finite + 0.5;
    let mut ticks = vec![0.0, 2f64.log10()];
    ticks.extend((1..=(x_finite + 1e-6).floor() as i32).map(f64::from));
    if has_max {
        ticks.push(x_of_max);
    }
    let x_axis = PercentileAxis {
        linear: (0f64..if has_max { x_of_max } else { x_finite }).into(),
        ticks,
    };
    let y_axis = log_axis(
        series.iter().flat_map(|s| plottable(&s.percentiles).map(|p| p.1)),
        legend_headroom(series),
    );
    let mut chart = drawing(
        ChartBuilder::on(&area)
            .caption(
                format!("{title}: latency by percentile"),
                CAPTION_FONT.into_font(),
            )
            .margin(12)
            .margin_right(30)
            .x_label_area_size(55)
            .y_label_area_size(80)
            .build_cartesian_2d(x_axis, y_axis),
    )?;
    let label_x = move |x: &f64| {
        if has_max && (x - x_of_max).abs() < 1e-9 {
            "max".to_string()
        } else {
            percentile_label(*x)
        }
    };
    drawing(
        chart
            .configure_mesh()
            .x_desc("percentile (1/(1-p) scale)")
            .y_desc("latency (ms, log scale)")
            .x_label_formatter(&label_x)
            .y_label_formatter(&|y| format_number(*y))
            .axis_desc_style(AXIS_DESC_FONT)
            .label_style(AXIS_LABEL_FONT)
            .light_line_style(BLACK.mix(0.06))
            .bold_line_style(BLACK.mix(0.15))
            .draw(),
    )?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let xy = move |(p, ms): (f64, f64)| {
            let x = if finite(p) { percentile_x(p) } else { x_of_max };
            (x, ms)
        };
        drawing(chart.draw_series(LineSeries::new(
            plottable(&s.percentiles).map(xy),
            c.stroke_width(2),
        )))?
        .label(&s.label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        // Mark the max: the line's last segment spans percentiles that were not measured.
        drawing(
            chart.draw_series(
                plottable(&s.percentiles)
                    .filter(|(p, _)| !finite(*p))
                    .map(|(_, ms)| Circle::new((x_of_max, ms), 4, c.filled())),
            ),
        )?;
        if plottable(&s.percentiles).count() <= SPARSE_PERCENTILE_POINTS {
            drawing(
                chart.draw_series(
                    plottable(&s.percentiles)
                        .filter(|(p, _)| finite(*p))
                        .map(xy)
                        .map(|p| Circle::new(p, 3, c.filled())),
                ),
            )?;
        }
    }
    drawing(
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(LEGEND_FONT)
            .draw(),
    )?;
    drawing(root.present())
}

#[cfg(test)]
mod tests {
    use super::*;
    use laminar_metrics::new_histogram;

    /// 1 ms, 2 ms, ... 1000 ms, once each.
    fn one_to_a_thousand_ms() -> Histogram<u64> {
        let mut h = new_histogram();
        for ms in 1..=1000u64 {
            h.record(ms * 1000).unwrap();
        }
        h
    }

    fn close(actual: f64, expected: f64) -> bool {
        // The histogram keeps 3 significant digits.
        (actual - expected).abs() <= expected * 1e-3 + 1e-9
    }

    #[test]
    fn percentiles_of_a_known_histogram() {
        let points = Series::from_histogram("x", &one_to_a_thousand_ms()).percentiles;
        // 1,000 samples resolve three decades (to p99.9), 20 points each, from p0; p50; max.
        assert_eq!(points.len(), 3 * 20 + 1 + 1 + 1);
        assert_eq!(points[0].0, 0.0);
        assert!(close(points[0].1, 1.0), "p0 {:?}", points[0]);
        let at = |p: f64| {
            points
                .iter()
                .find(|(q, _)| (q - p).abs() < 1e-6)
                .unwrap_or_else(|| panic!("no point at p{p}: {points:?}"))
                .1
        };
        assert!(close(at(50.0), 500.0), "p50 {}", at(50.0));
        assert!(close(at(90.0), 900.0), "p90 {}", at(90.0));
        assert!(close(at(99.0), 990.0), "p99 {}", at(99.0));
        assert!(close(at(99.9), 999.0), "p99.9 {}", at(99.9));
        assert_eq!(points.last().unwrap().0, 100.0);
        assert!(close(points.last().unwrap().1, 1000.0));
        for w in points.windows(2) {
            assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "not ascending: {w:?}");
        }
        // The same numbers as the reports print.
        let p = laminar_metrics::Percentiles::of(&one_to_a_thousand_ms());
        assert_eq!(at(99.0), p.p99 as f64 / 1000.0);
        assert!(Series::from_histogram("empty", &new_histogram())
            .percentiles
            .is_empty());
    }

    #[test]
    fn percentiles_stop_at_p99_999() {
        let mut h = new_histogram();
        h.record_n(100, 10_000_000).unwrap();
        let points = percentile_points(&h);
        assert_eq!(points.len(), 5 * 20 + 1 + 1 + 1);
        assert_eq!(points[points.len() - 2].0, 99.999);
    }

    #[test]
    fn time_series_keeps_the_max_of_each_bucket() {
        let mut ts = TimeSeries::new(Duration::from_millis(100));
        ts.record(Duration::from_millis(10), 500);
        ts.record(Duration::from_millis(99), 7_000);
        ts.record(Duration::from_millis(250), 300);
        let mut other = TimeSeries::new(Duration::from_millis(100));
        other.record(Duration::from_millis(420), 2_000);
        ts.merge(&other);
        assert_eq!(ts.points(), vec![(0.0, 7.0), (0.2, 0.3), (0.4, 2.0)]);

        ts.record(Duration::from_secs(1_000_000), 1);
        assert_eq!(ts.dropped(), 1);
    }

    #[test]
    fn time_series_merges_buckets_past_the_point_limit() {
        let mut ts = TimeSeries::new(Duration::from_millis(1));
        for ms in 0..3 * OVER_TIME_POINTS_MAX as u64 {
            ts.record(Duration::from_millis(ms), 1 + ms % 3);
        }
        ts.record(Duration::from_millis(4), 9_000);
        let points = ts.points();
        assert_eq!(points.len(), OVER_TIME_POINTS_MAX);
        assert_eq!(points[0], (0.0, 0.003));
        assert_eq!(points[1], (0.003, 9.0));
    }

    #[test]
    fn series_files_hold_one_or_many() {
        let dir = tempfile::tempdir().unwrap();
        let s = Series::from_histogram("Laminar acks=all", &one_to_a_thousand_ms())
            .with_unit_note("produce latency");
        let one = dir.path().join("one.json");
        s.write_json(&one).unwrap();
        assert_eq!(read_series(&one).unwrap(), vec![s.clone()]);
        let many = dir.path().join("many.json");
        std::fs::write(&many, serde_json::to_string(&[&s, &s]).unwrap()).unwrap();
        assert_eq!(read_series(&many).unwrap().len(), 2);
        for n in [1, 2] {
            let path = dir.path().join(format!("written-{n}.json"));
            write_series_json_to(&vec![s.clone(); n], File::create(&path).unwrap()).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.starts_with('['), n > 1, "one object for one series: {text}");
            assert_eq!(read_series(&path).unwrap(), vec![s.clone(); n]);
        }
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"nope\": 1}").unwrap();
        assert!(read_series(&bad).is_err());
    }

    #[test]
    fn charts_are_written_with_every_label() {
        let dir = tempfile::tempdir().unwrap();
        let mut fast = TimeSeries::new(OVER_TIME_BUCKET);
        let mut slow = TimeSeries::new(OVER_TIME_BUCKET);
        for i in 0..300u64 {
            fast.record(Duration::from_millis(i * 100), 800 + i % 7 * 50);
            slow.record(Duration::from_millis(i * 100), 2_000 + (i % 50) * 4_000);
        }
        let mut slow_h = new_histogram();
        for us in 1..=100_000u64 {
            slow_h.record(us * 3).unwrap();
        }
        let series = [
            Series::from_histogram("Laminar acks=all", &one_to_a_thousand_ms())
                .with_over_time(&fast)
                .with_unit_note("send to delivery report; over time: max per 100 ms"),
            Series::from_histogram("Kafka acks=all", &slow_h).with_over_time(&slow),
            // Nothing to draw: still in the legend, and no failure.
            Series::from_histogram("empty & <odd>", &new_histogram()),
        ];
        let prefix = dir.path().join("sub").join("s1");
        let paths = write_charts(&prefix, "S1 cold catch-up", &series).unwrap();
        assert_eq!(
            paths,
            vec![
                dir.path().join("sub/s1-over-time.svg"),
                dir.path().join("sub/s1-percentiles.svg"),
            ]
        );
        for p in &paths {
            let svg = std::fs::read_to_string(p).unwrap();
            assert!(svg.starts_with("<svg"), "{}", p.display());
            for needle in [
                "Laminar acks=all",
                "Kafka acks=all",
                "S1 cold catch-up",
                "latency (ms, log scale)",
                "max per 100 ms",
            ] {
                assert!(svg.contains(needle), "{} lacks {needle:?}", p.display());
            }
        }
        // plotters writes each text on its own line between the tags.
        let percentiles = std::fs::read_to_string(&paths[1]).unwrap();
        let texts: Vec<&str> = percentiles.lines().map(str::trim).collect();
        for label in ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%", "max"] {
            assert!(texts.contains(&label), "no x label {label}");
        }
        assert!(texts.contains(&"empty &amp; &lt;odd&gt;"), "labels are escaped");
    }

    /// Tools that print only a few percentiles: no over-time chart, and a percentiles chart
    /// beside a series that has both.
    #[test]
    fn series_without_over_time() {
        let dir = tempfile::tempdir().unwrap();
        let few = |label: &str| Series {
            label: label.to_string(),
            over_time: Vec::new(),
            percentiles: vec![(50.0, 2.0), (95.0, 5.0), (99.0, 9.0), (99.9, 30.0), (100.0, 80.0)],
            unit_note: Some("ProducerPerformance".to_string()),
        };
        let prefix = dir.path().join("produce");
        let paths = write_charts(&prefix, "produce", &[few("Laminar"), few("Kafka")]).unwrap();
        assert_eq!(paths, vec![dir.path().join("produce-percentiles.svg")]);
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(svg.contains("Laminar") && svg.contains("Kafka"));
        assert!(!dir.path().join("produce-over-time.svg").exists());

        let mut one_point = TimeSeries::new(OVER_TIME_BUCKET);
        one_point.record(Duration::from_millis(30), 1_500);
        let mixed = [
            few("Kafka"),
            Series::from_histogram("Laminar", &one_to_a_thousand_ms()).with_over_time(&one_point),
        ];
        let paths = write_charts(&prefix, "mixed", &mixed).unwrap();
        assert_eq!(paths.len(), 2);
        let over_time = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(over_time.contains("Kafka"), "still in the legend");
        assert!(over_time.contains("<circle"), "a lone point is marked");
    }

    #[test]
    fn axis_labels() {
        assert_eq!(percentile_label(2f64.log10()), "50%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(format_number(0.05), "0.05");
        assert_eq!(format_number(1500.0), "1500");
        assert_eq!(step_at_or_below(0.37), 0.2);
        assert_eq!(step_at_or_above(0.37), 0.5);
        assert_eq!(step_at_or_above(7.0), 10.0);
        assert_eq!(step_at_or_below(1000.0), 1000.0);
    }
}
