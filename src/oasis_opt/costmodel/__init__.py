"""costmodel"""
