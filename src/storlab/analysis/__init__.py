"""storlab.analysis"""
