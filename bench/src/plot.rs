//! The plot: IDs per second against connections, one line per approach, for pipelines of
//! 1 and 32, as SVG.

use std::path::Path;

use plotters::prelude::*;

use crate::server_side::{Approach, Measurement, CLIENTS, PIPELINES};

pub fn draw(results: &[Measurement], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    // Headroom above the highest line for the legend.
    let max = results.iter().map(|m| m.ids_per_second).fold(1.0, f64::max) * 300.0;
    let min = results
        .iter()
        .map(|m| m.ids_per_second)
        .fold(f64::MAX, f64::min)
        .max(1.0)
        / 2.0;
    let colors = [RED, BLUE, GREEN, MAGENTA, BLACK, CYAN];
    for (panel, pipeline) in panels.iter().zip(PIPELINES) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("pipeline {pipeline}: IDs per second"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..2.2f64, (min..max).log_scale())?;
        chart
            .configure_mesh()
            .x_labels(3)
            .x_label_formatter(&|x| {
                let index = x.round() as usize;
                CLIENTS
                    .get(index)
                    .map_or(String::new(), |c| format!("{c} conn"))
            })
            .y_label_formatter(&|y| format!("{y:.0e}"))
            .draw()?;
        for (approach, color) in Approach::ALL.iter().zip(colors) {
            let points: Vec<(f64, f64)> = CLIENTS
                .iter()
                .enumerate()
                .filter_map(|(index, &clients)| {
                    results
                        .iter()
                        .find(|m| {
                            m.approach == *approach
                                && m.clients == clients
                                && m.pipeline == pipeline
                        })
                        .map(|m| (index as f64, m.ids_per_second))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(approach.name())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
