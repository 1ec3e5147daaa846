"""UI-side helpers of the Streamlit portal (they import streamlit; pure logic lives in core/)."""
