//! `latency.svg`.

use super::*;

/// The SVG line chart of `latency.svg`: median latency against graph size, both on
/// log scales, one line per query of `names` (drawn with plotters).
pub(crate) fn plot(results: &[ScaleResult], names: &[&str]) -> Result<String> {
    use plotters::prelude::*;
    let series: Vec<(&str, Vec<(f64, f64)>)> = names
        .iter()
        .map(|name| {
            let points = results
                .iter()
                .filter_map(|r| {
                    let q = r.queries.iter().find(|q| q.name == *name)?;
                    Some((r.scale as f64, q.median_us.max(1.0)))
                })
                .collect();
            (*name, points)
        })
        .filter(|(_, points): &(&str, Vec<(f64, f64)>)| !points.is_empty())
        .collect();
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in all {
        (x0, x1, y0, y1) = (x0.min(*x), x1.max(*x), y0.min(*y), y1.max(*y));
    }
    if series.is_empty() {
        return Ok(String::new());
    }
    // Whole decades around the data.
    let decade_down = |v: f64| 10f64.powf(v.log10().floor());
    let decade_up = |v: f64| 10f64.powf(v.log10().ceil());
    let (x0, x1) = (decade_down(x0), decade_up(x1).max(decade_down(x0) * 10.0));
    let (y0, y1) = (decade_down(y0), decade_up(y1).max(decade_down(y0) * 10.0));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 460)).into_drawing_area();
        let drawn = (|| -> std::result::Result<(), Box<dyn std::error::Error + '_>> {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    "kip-nexus: median latency vs graph size (log-log)",
                    ("sans-serif", 16),
                )
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("concepts in the graph")
                .y_desc("median latency")
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|us| {
                    if *us >= 1000.0 {
                        format!("{} ms", us / 1000.0)
                    } else {
                        format!("{us} us")
                    }
                })
                .draw()?;
            for (i, (name, points)) in series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(
                        points.iter().copied(),
                        color.stroke_width(2),
                    ))?
                    .label(*name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
            root.present()?;
            Ok(())
        })();
        drawn.map_err(|e| anyhow::anyhow!("drawing the latency chart: {e}"))?;
    }
    Ok(svg)
}
