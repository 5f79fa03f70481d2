import { configure } from "@testing-library/react";

// The machines running CI are shared and loaded: wait for the DOM longer than testing-library's 1 s.
configure({ asyncUtilTimeout: 15000 });

// jsdom has no matchMedia; uPlot (the chart) asks for the pixel ratio when it is imported.
if (!window.matchMedia) {
  window.matchMedia = ((query: string) => ({
    matches: false, media: query, onchange: null,
    addListener() {}, removeListener() {}, addEventListener() {}, removeEventListener() {}, dispatchEvent: () => false,
  })) as unknown as typeof window.matchMedia;
}
